// The socket-free parts of the HTTP layer: connection caps and head
// deadlines (ConnectionTable), the stream queue between a handler and its
// socket (StreamChannel), and the handler threads (WorkerPool).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "server/connection_table.h"
#include "server/stream_channel.h"
#include "server/worker_pool.h"

namespace ingot::server {
namespace {

using namespace std::chrono_literals;
using Clock = ConnectionTable::Clock;
using Admission = ConnectionTable::Admission;

TEST(ConnectionTableTest, CapsPerClientAndInTotal) {
  ConnectionTable t({/*max_total=*/5, /*max_per_client=*/2, 10s});
  auto now = Clock::now();
  EXPECT_EQ(t.admit(10, "a", now), Admission::Admitted);
  EXPECT_EQ(t.admit(11, "a", now), Admission::Admitted);
  EXPECT_EQ(t.admit(12, "a", now), Admission::ClientFull);
  EXPECT_EQ(t.admit(13, "b", now), Admission::Admitted);
  EXPECT_EQ(t.admit(14, "b", now), Admission::Admitted);
  EXPECT_EQ(t.admit(15, "c", now), Admission::Admitted);
  EXPECT_EQ(t.admit(16, "d", now), Admission::TotalFull);
  EXPECT_EQ(t.open(), 5u);
  EXPECT_EQ(t.open_from("a"), 2u);
  EXPECT_EQ(t.open_from("d"), 0u);
  t.release(10);
  t.release(10);  // twice: no effect
  EXPECT_EQ(t.open_from("a"), 1u);
  EXPECT_EQ(t.admit(17, "a", now), Admission::Admitted);
  t.release(99);  // unknown
  EXPECT_EQ(t.open(), 5u);
}

TEST(ConnectionTableTest, AReusedDescriptorReplacesItsStaleEntry) {
  ConnectionTable t({4, 4, 10s});
  auto now = Clock::now();
  EXPECT_EQ(t.admit(7, "a", now), Admission::Admitted);
  EXPECT_EQ(t.admit(7, "b", now), Admission::Admitted);  // fd 7 closed without a release, then reused
  EXPECT_EQ(t.open(), 1u);
  EXPECT_EQ(t.open_from("a"), 0u);
  EXPECT_EQ(t.open_from("b"), 1u);
}

TEST(ConnectionTableTest, FirstHeadDeadlineCountsFromTheAccept) {
  ConnectionTable t({8, 8, 2s});
  auto t0 = Clock::now();
  t.admit(3, "a", t0);
  t.admit(4, "a", t0);
  t.request_started(4);  // its head arrived in time
  std::vector<int> closed;
  auto none = [](int) -> uint64_t { return 0; };
  auto record = [&](int fd) { closed.push_back(fd); };
  EXPECT_EQ(t.close_overdue(t0 + 1900ms, none, record), 0u);
  EXPECT_EQ(t.close_overdue(t0 + 2100ms, none, record), 1u);
  EXPECT_EQ(closed, std::vector<int>({3}));
  EXPECT_EQ(t.close_overdue(t0 + 5s, none, record), 0u);  // closed once only
  EXPECT_EQ(t.open(), 2u);                                 // until the socket is released
}

TEST(ConnectionTableTest, KeptAliveConnectionsGetTheDeadlineFromTheirNextFirstByte) {
  ConnectionTable t({8, 8, 2s});
  auto t0 = Clock::now();
  t.admit(3, "a", t0);
  t.request_started(3);
  t.request_finished(3, /*bytes_received=*/500, t0 + 1s);
  uint64_t received = 500;
  auto bytes = [&](int) { return received; };
  std::vector<int> closed;
  auto record = [&](int fd) { closed.push_back(fd); };
  // Idle (no new bytes) long past the head deadline: not this table's to close.
  EXPECT_EQ(t.close_overdue(t0 + 30s, bytes, record), 0u);
  received = 510;  // the next head starts arriving
  EXPECT_EQ(t.close_overdue(t0 + 31s, bytes, record), 0u);
  EXPECT_EQ(t.close_overdue(t0 + 32900ms, bytes, record), 0u);
  EXPECT_EQ(t.close_overdue(t0 + 33100ms, bytes, record), 1u);
  EXPECT_EQ(closed, std::vector<int>({3}));
}

TEST(StreamChannelTest, PassesBytesInOrderAndEnds) {
  std::atomic<int> wakes{0};
  StreamChannel ch(16, 1s, [&] { ++wakes; });
  char buf[64];
  size_t n = 0;
  bool parked = false;
  EXPECT_EQ(ch.read(buf, sizeof(buf), &n, [&] { parked = true; }), StreamChannel::Read::Parked);
  EXPECT_TRUE(parked);
  EXPECT_TRUE(ch.write("hello "));
  EXPECT_EQ(wakes.load(), 1);  // the parked reader is woken once
  EXPECT_TRUE(ch.write("world"));
  EXPECT_EQ(wakes.load(), 1);
  EXPECT_EQ(ch.read(buf, 4, &n, nullptr), StreamChannel::Read::Data);
  EXPECT_EQ(std::string(buf, n), "hell");
  EXPECT_EQ(ch.read(buf, sizeof(buf), &n, nullptr), StreamChannel::Read::Data);
  EXPECT_EQ(std::string(buf, n), "o world");
  ch.finish();
  EXPECT_EQ(ch.read(buf, sizeof(buf), &n, nullptr), StreamChannel::Read::End);
}

TEST(StreamChannelTest, AWriterBlockedByAStalledReaderFailsAfterTheDeadline) {
  StreamChannel ch(8, 200ms, nullptr);
  EXPECT_TRUE(ch.write("12345678"));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ch.write("9"));  // nobody reads
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 2s);
  EXPECT_TRUE(ch.stalled());
  EXPECT_TRUE(ch.closed());
  EXPECT_FALSE(ch.write("x"));
}

TEST(StreamChannelTest, ReadingMakesRoomAndClosingReleasesAWaitingWriter) {
  StreamChannel ch(4, 5s, nullptr);
  EXPECT_TRUE(ch.write("abcd"));
  std::thread reader([&] {
    std::this_thread::sleep_for(50ms);
    char b[4];
    size_t n = 0;
    ch.read(b, sizeof(b), &n, nullptr);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ch.write("efgh"));  // waits for the reader, not for the deadline
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  reader.join();
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    ch.close();  // the connection went away
  });
  EXPECT_FALSE(ch.write("ijkl"));
  closer.join();
  EXPECT_FALSE(ch.stalled());
  char b[8];
  size_t n = 0;
  EXPECT_EQ(ch.read(b, sizeof(b), &n, nullptr), StreamChannel::Read::Data);  // what was queued before the close
  EXPECT_EQ(ch.read(b, sizeof(b), &n, nullptr), StreamChannel::Read::Closed);
}

TEST(StreamChannelTest, APieceLargerThanTheQueueGoesInWhenItIsEmpty) {
  StreamChannel ch(4, 100ms, nullptr);
  EXPECT_TRUE(ch.write(std::string(10, 'x')));
  char b[16];
  size_t n = 0;
  EXPECT_EQ(ch.read(b, sizeof(b), &n, nullptr), StreamChannel::Read::Data);
  EXPECT_EQ(n, 10u);
}

TEST(WorkerPoolTest, StartsThreadsOnDemandUpToTheCapAndRunsEveryJob) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(3);
    EXPECT_EQ(pool.threads(), 0u);
    std::mutex mu;
    std::set<std::thread::id> ids;
    for (int i = 0; i < 20; ++i)
      pool.submit([&] {
        std::this_thread::sleep_for(5ms);
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
        ++done;
      });
    EXPECT_LE(pool.threads(), 3u);
    pool.shutdown();
    EXPECT_EQ(done.load(), 20);
    EXPECT_LE(ids.size(), 3u);
    EXPECT_GE(ids.size(), 2u);
  }
  WorkerPool idle(4);
  idle.submit([&] { ++done; });
  for (int i = 0; i < 200 && done.load() < 21; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms);
  idle.submit([&] { ++done; });  // an idle thread takes it: no second thread
  EXPECT_EQ(idle.threads(), 1u);
  idle.shutdown();
  EXPECT_EQ(done.load(), 22);
  EXPECT_EQ(idle.threads(), 0u);
}

}  // namespace
}  // namespace ingot::server
