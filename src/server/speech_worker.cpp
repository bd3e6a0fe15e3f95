#include "server/speech_worker.h"

#include "server/api_error.h"
#include "util/error.h"

namespace ingot::server {

SpeechWorker::SpeechWorker(Run run, std::string model_id, std::vector<std::string> aliases, size_t max_queue)
    : SpeechWorker(std::move(run), nullptr, std::move(model_id), std::move(aliases), max_queue) {}

SpeechWorker::SpeechWorker(Run run, Prepare prepare, std::string model_id, std::vector<std::string> aliases,
                           size_t max_queue)
    : run_(std::move(run)),
      prepare_(std::move(prepare)),
      model_id_(std::move(model_id)),
      aliases_(std::move(aliases)),
      max_queue_(max_queue) {
  thread_ = std::thread([this] { loop(); });
}

void SpeechWorker::prepare(SpeechJob& job) const {
  if (prepare_) prepare_(job);
}

SpeechWorker::~SpeechWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool SpeechWorker::serves(const std::string& name) const {
  if (name == model_id_) return true;
  for (const auto& a : aliases_)
    if (name == a) return true;
  return false;
}

size_t SpeechWorker::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

SpeechWorker::Ticket SpeechWorker::submit(SpeechJob job) {
  Ticket t;
  t.cancelled_ = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw ApiError(503, "the server is shutting down");
    if (queue_.size() >= max_queue_)
      throw ApiError(429, str_cat("too many transcriptions waiting (", queue_.size(), "); retry later"), "",
                     "rate_limit_exceeded");
    Item item{std::move(job), {}, t.cancelled_};
    t.result_ = item.promise.get_future().share();
    queue_.push_back(std::move(item));
  }
  cv_.notify_one();
  return t;
}

void SpeechWorker::loop() {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      if (stop_) {  // fail what is left so no handler waits forever
        for (Item& i : queue_) i.promise.set_exception(std::make_exception_ptr(ApiError(503, "the server is shutting down")));
        queue_.clear();
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (item.cancelled->load()) {
      item.promise.set_exception(std::make_exception_ptr(ApiError(499, "cancelled")));
      continue;
    }
    try {
      item.promise.set_value(run_(item.job));
    } catch (...) {
      item.promise.set_exception(std::current_exception());
    }
  }
}

bool SpeechWorker::Ticket::wait(std::chrono::milliseconds timeout) const {
  return result_.wait_for(timeout) == std::future_status::ready;
}

speech::Transcript SpeechWorker::Ticket::get() { return result_.get(); }

}  // namespace ingot::server
