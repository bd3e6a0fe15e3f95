// The speech worker: bounded queue (429), results and errors reach the
// caller, cancelled queued jobs never run.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "server/api_error.h"
#include "server/speech_worker.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::server;

namespace {

SpeechJob job_of(size_t samples) {
  SpeechJob j;
  j.samples = static_cast<int64_t>(samples);
  return j;
}

}  // namespace

TEST(SpeechWorker, QueueIsBoundedAndJobsRunInOrder) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  SpeechWorker w(
      [&](const SpeechJob& j) {
        gate.wait();
        ++ran;
        speech::Transcript t;
        t.text = std::to_string(j.samples);
        return t;
      },
      "whisper", {"alias"}, 1);
  auto first = w.submit(job_of(1));
  // The worker takes the first job; wait until it has left the queue.
  for (int i = 0; i < 1000 && w.waiting() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = w.submit(job_of(2));
  try {
    w.submit(job_of(3));
    FAIL() << "a full queue must refuse";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 429);
  }
  EXPECT_FALSE(first.wait(std::chrono::milliseconds(10)));
  release.set_value();
  EXPECT_EQ(first.get().text, "1");
  EXPECT_EQ(second.get().text, "2");
  EXPECT_EQ(ran.load(), 2);
  EXPECT_TRUE(w.serves("whisper") && w.serves("alias") && !w.serves("other"));
}

TEST(SpeechWorker, ErrorsReachTheCallerAndCancelledJobsDoNotRun) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  SpeechWorker w(
      [&](const SpeechJob& j) -> speech::Transcript {
        gate.wait();
        ++ran;
        if (j.samples == 7) fail(ErrorKind::InvalidArgument, "bad language");
        return {};
      },
      "whisper", {}, 4);
  auto failing = w.submit(job_of(7));
  auto dropped = w.submit(job_of(1));
  dropped.cancel();
  release.set_value();
  try {
    failing.get();
    FAIL() << "the job's error must be rethrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
  EXPECT_THROW(dropped.get(), ApiError);
  EXPECT_EQ(ran.load(), 1);
}
