// The named LoRA adapters a server offers over its one base model: given at
// start (--lora NAME=PATH, --adapter-path) or loaded at run time
// (/v1/load_lora_adapter). At most `max_resident` are held in memory; the
// least recently used is dropped first and loaded again from its path when a
// request names it (running requests keep theirs until they finish).
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ingot {
class LoraAdapter;
}

namespace ingot::server {

class LoraRegistry {
 public:
  // Loads one adapter folder for the served model; throws ingot::Error.
  using Loader = std::function<std::shared_ptr<const LoraAdapter>(const std::string& path)>;
  LoraRegistry(Loader load, size_t max_resident);

  // Loads `path` and registers it as `name` (InvalidArgument when the name is
  // taken or empty; the loader's error when the adapter is bad: nothing changes).
  void add(const std::string& name, const std::string& path);
  // False when no adapter has that name.
  bool remove(const std::string& name);
  bool has(const std::string& name) const;
  // The adapter named `name`, loaded again when it was dropped; nullptr when
  // the name is unknown.
  std::shared_ptr<const LoraAdapter> get(const std::string& name);
  // The adapter applied when a request names none of the adapters (--adapter-path).
  void set_default(const std::string& name);
  std::shared_ptr<const LoraAdapter> get_default();

  struct Listed {
    std::string name, path;
    bool resident = false;
  };
  std::vector<Listed> list() const;
  size_t resident() const;

 private:
  struct Entry {
    std::string name, path;
    std::shared_ptr<const LoraAdapter> adapter;  // null: dropped, reloaded on use
  };
  std::shared_ptr<const LoraAdapter> use(Entry& e);  // under mu_
  void drop_over_limit(const Entry* keep);         // under mu_
  size_t resident_locked() const;

  Loader load_;
  size_t max_resident_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // front: most recently used
  std::string default_;
};

}  // namespace ingot::server
