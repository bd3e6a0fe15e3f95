// The speech-to-text model behind /v1/audio/*: one worker thread with a
// bounded queue, so transcriptions never take the chat engine's thread and a
// burst of uploads is answered 429 instead of piling up.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "audio/pcm_source.h"
#include "speech/transcribe.h"

namespace ingot::server {

struct SpeechJob {
  // 16 kHz mono, read from the start a window at a time (the upload's bytes
  // stay compressed in memory; its samples never all are).
  std::shared_ptr<audio::PcmSource> audio;
  int64_t samples = 0;  // counted when the upload was checked
  speech::TranscribeOptions options;
  std::string prompt;  // previous-text prompt, tokenized by the model's tokenizer
};

class SpeechWorker {
 public:
  using Run = std::function<speech::Transcript(const SpeechJob&)>;
  // Completes and checks a job before it queues (tokenizes its prompt, checks
  // its options against the model); throws Error for one the model cannot run.
  using Prepare = std::function<void(SpeechJob&)>;
  // `model_id` and `aliases` are the names requests may use for the model.
  SpeechWorker(Run run, std::string model_id, std::vector<std::string> aliases, size_t max_queue);
  SpeechWorker(Run run, Prepare prepare, std::string model_id, std::vector<std::string> aliases, size_t max_queue);
  ~SpeechWorker();
  SpeechWorker(const SpeechWorker&) = delete;
  SpeechWorker& operator=(const SpeechWorker&) = delete;

  class Ticket {
   public:
    // Waits up to `timeout` for the result; true once it is ready.
    bool wait(std::chrono::milliseconds timeout) const;
    // The transcript, or the job's exception rethrown.
    speech::Transcript get();
    // A job still queued is dropped; a running one finishes unseen.
    void cancel() { cancelled_->store(true); }

   private:
    friend class SpeechWorker;
    std::shared_future<speech::Transcript> result_;
    std::shared_ptr<std::atomic<bool>> cancelled_;
  };

  // Runs Prepare on the caller's thread (nothing when there is none).
  void prepare(SpeechJob& job) const;
  // Queues a job; ApiError 429 when `max_queue` jobs are already waiting.
  Ticket submit(SpeechJob job);

  const std::string& model_id() const { return model_id_; }
  bool serves(const std::string& name) const;
  size_t waiting() const;

 private:
  struct Item {
    SpeechJob job;
    std::promise<speech::Transcript> promise;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  void loop();

  Run run_;
  Prepare prepare_;
  std::string model_id_;
  std::vector<std::string> aliases_;
  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ingot::server
