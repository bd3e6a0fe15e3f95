#include "server/lora_registry.h"

#include <algorithm>

#include "util/error.h"

namespace ingot::server {

LoraRegistry::LoraRegistry(Loader load, size_t max_resident) : load_(std::move(load)), max_resident_(max_resident) {
  INGOT_CHECK(max_resident_ >= 1);
}

void LoraRegistry::add(const std::string& name, const std::string& path) {
  if (name.empty()) fail(ErrorKind::InvalidArgument, "a LoRA adapter needs a name");
  if (path.empty()) fail(ErrorKind::InvalidArgument, "LoRA adapter '", name, "' needs a path");
  {
    std::lock_guard<std::mutex> g(mu_);
    if (std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }))
      fail(ErrorKind::InvalidArgument, "a LoRA adapter named '", name, "' is already loaded");
  }
  // Loading reads files: outside the lock, so requests for other adapters go on.
  std::shared_ptr<const LoraAdapter> adapter = load_(path);
  std::lock_guard<std::mutex> g(mu_);
  if (std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }))
    fail(ErrorKind::InvalidArgument, "a LoRA adapter named '", name, "' is already loaded");
  entries_.push_front({name, path, std::move(adapter)});
  drop_over_limit(&entries_.front());
}

bool LoraRegistry::remove(const std::string& name) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  if (default_ == name) default_.clear();
  return true;
}

bool LoraRegistry::has(const std::string& name) const {
  std::lock_guard<std::mutex> g(mu_);
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
}

std::shared_ptr<const LoraAdapter> LoraRegistry::use(Entry& e) {
  // Reloading holds the lock: a second request for the same dropped adapter
  // waits for this load instead of loading it twice.
  if (!e.adapter) e.adapter = load_(e.path);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return &x == &e; });
  entries_.splice(entries_.begin(), entries_, it);
  drop_over_limit(&e);
  return e.adapter;
}

void LoraRegistry::drop_over_limit(const Entry* keep) {
  size_t n = resident_locked();
  for (auto it = entries_.rbegin(); it != entries_.rend() && n > max_resident_; ++it)
    if (&*it != keep && it->adapter) {
      it->adapter.reset();
      --n;
    }
}

size_t LoraRegistry::resident_locked() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.adapter != nullptr; }));
}

std::shared_ptr<const LoraAdapter> LoraRegistry::get(const std::string& name) {
  std::lock_guard<std::mutex> g(mu_);
  for (Entry& e : entries_)
    if (e.name == name) return use(e);
  return nullptr;
}

void LoraRegistry::set_default(const std::string& name) {
  std::lock_guard<std::mutex> g(mu_);
  INGOT_CHECK(std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; }));
  default_ = name;
}

std::shared_ptr<const LoraAdapter> LoraRegistry::get_default() {
  std::lock_guard<std::mutex> g(mu_);
  if (default_.empty()) return nullptr;
  for (Entry& e : entries_)
    if (e.name == default_) return use(e);
  return nullptr;
}

std::vector<LoraRegistry::Listed> LoraRegistry::list() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<Listed> out;
  for (const Entry& e : entries_) out.push_back({e.name, e.path, e.adapter != nullptr});
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) { return a.name < b.name; });
  return out;
}

size_t LoraRegistry::resident() const {
  std::lock_guard<std::mutex> g(mu_);
  return resident_locked();
}

}  // namespace ingot::server
