#include "registry/download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "registry/hashing.h"
#include "registry/progress.h"
#include "util/error.h"

namespace ingot::registry {

namespace {

// Runs fn(i) for i in [0, n) on `jobs` threads; the first error stops the rest
// (fn sees `cancel`) and is rethrown.
template <typename Fn>
void run_parallel(size_t n, int jobs, std::atomic<bool>& cancel, Fn fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr first;
  auto worker = [&] {
    for (size_t i; !cancel.load() && (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!first) first = std::current_exception();
        cancel = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t count = std::min<size_t>(n, static_cast<size_t>(std::max(1, jobs)));
  for (size_t t = 0; t < count; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

int64_t size_or_zero(const fs::path& p) {
  std::error_code ec;
  auto s = fs::file_size(p, ec);
  return ec ? 0 : static_cast<int64_t>(s);
}

struct Blob {
  std::string etag, file;  // `file`: the first repo file with this content (for messages and the URL)
  int64_t size = -1;
};

// huggingface_hub's lock for one blob (<cache>/.locks/<repo folder>/<etag>.lock, flock'ed), so
// that it and other ingot processes never write the same .incomplete file at once.
class BlobLock {
 public:
  BlobLock(const fs::path& cache_dir, const std::string& repo_id, const std::string& etag) {
    const fs::path dir = cache_dir / ".locks" / repo_folder_name(repo_id);
    std::error_code ec;
    fs::create_directories(dir, ec);
    fd_ = ::open((dir / (etag + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

void fetch_blob(const HubConfig& hub, const RepoPaths& paths, const std::string& repo_id, const std::string& commit,
                const Blob& b, const GetOptions& opt, Progress& progress, std::atomic<int64_t>& fetched,
                const std::atomic<bool>& cancel) {
  const fs::path part = paths.incomplete(b.etag), final_path = paths.blob(b.etag);
  BlobLock lock(hub.cache_dir, repo_id, b.etag);
  if (fs::exists(final_path) && (b.size < 0 || size_or_zero(final_path) == b.size)) return;  // another process finished it
  const std::string url = resolve_url(hub, repo_id, commit, b.file);
  int mismatches = 0;
  std::string last_error;
  for (int attempt = 0; attempt < opt.attempts + 2 * mismatches;) {
    if (cancel.load()) fail(ErrorKind::Io, "cancelled");
    int64_t have = size_or_zero(part);
    if (b.size >= 0 && have > b.size) {
      fs::resize_file(part, 0);
      progress.add(-have);
      have = 0;
    }
    if (b.size < 0 || have < b.size || !fs::exists(part)) {
      if (have > 0) progress.note(str_cat(b.file, ": resuming at byte ", have));
      TransferResult r = fetch_to_file(
          hub, url, part, have,
          [&](int64_t d) {
            progress.add(d);
            if (d > 0) fetched.fetch_add(d);
          },
          cancel);
      if (!r.ok) {
        if (!r.retryable) fail(ErrorKind::Io, b.file, ": ", r.error);
        last_error = r.error;
        ++attempt;
        continue;
      }
      const int64_t got = size_or_zero(part);
      if (b.size >= 0 && got != b.size) {
        last_error = str_cat("the connection ended at byte ", got, " of ", b.size);
        ++attempt;
        continue;
      }
    }
    if (!content_matches_etag(part, b.etag)) {
      // Corrupt bytes are never resumed from: start this file over.
      const int64_t bad = size_or_zero(part);
      fs::remove(part);
      progress.add(-bad);
      if (++mismatches > 2)
        fail(ErrorKind::BadFormat, b.file, ": the downloaded content does not match its etag ", b.etag,
             " (3 downloads tried)");
      progress.note(str_cat(b.file, ": checksum mismatch, downloading it again"));
      continue;
    }
    std::error_code ec;
    fs::rename(part, final_path, ec);
    if (ec) fail(ErrorKind::Io, "cannot rename ", part.string(), ": ", ec.message());
    return;
  }
  fail(ErrorKind::Io, b.file, ": download interrupted (", last_error, "); ", human_bytes(size_or_zero(part)),
       " kept in ", part.string(), "; run the same command again to resume");
}

}  // namespace

void link_snapshot_file(const RepoPaths& paths, const std::string& commit, const std::string& file,
                        const std::string& etag) {
  const fs::path link = paths.snapshot_file(commit, file);
  fs::create_directories(link.parent_path());
  // A name of this process's own: another `ingot get` may be linking the same file.
  const fs::path tmp = link.string() + ".link-tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(blob_link_target(file, etag), tmp);
  fs::rename(tmp, link);
}

void write_ref(const RepoPaths& paths, const std::string& revision, const std::string& commit) {
  const fs::path ref = paths.ref(revision);
  fs::create_directories(ref.parent_path());
  const fs::path tmp = ref.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out.flush()) fail(ErrorKind::Io, "cannot write ", tmp.string());
  }
  fs::rename(tmp, ref);
}

GetResult get_repo(const HubConfig& hub, const RepoRef& ref, const GetOptions& opt, std::FILE* log) {
  if (opt.jobs < 1) fail(ErrorKind::InvalidArgument, "--jobs must be >= 1");
  RevisionInfo info = fetch_revision(hub, ref);
  if (ref.revision_given && is_commit_hash(ref.revision) && info.commit.rfind(ref.revision, 0) != 0)
    fail(ErrorKind::BadFormat, "the hub resolved commit ", ref.revision, " to ", info.commit);
  GetResult res;
  res.repo_id = ref.repo_id;
  res.commit = info.commit;
  res.files = select_files(ref.repo_id, info.files, opt.selection);
  const RepoPaths paths = repo_paths(hub.cache_dir, ref.repo_id);
  res.snapshot = paths.snapshot(info.commit);
  std::error_code ec;
  fs::create_directories(paths.blobs(), ec);
  if (ec) fail(ErrorKind::Io, "cannot create ", paths.blobs().string(), ": ", ec.message());
  std::fprintf(log, "%s@%s: %zu file%s at commit %s\n", ref.repo_id.c_str(), ref.revision.c_str(), res.files.size(),
               res.files.size() == 1 ? "" : "s", info.commit.c_str());

  // Metadata first (etag and size of each file), so identical contents download once.
  std::vector<FileMeta> metas(res.files.size());
  std::atomic<bool> cancel{false};
  run_parallel(res.files.size(), opt.jobs, cancel, [&](size_t i) {
    metas[i] = head_file(hub, ref.repo_id, info.commit, res.files[i]);
    if (!metas[i].commit.empty() && metas[i].commit != info.commit)
      fail(ErrorKind::BadFormat, res.files[i], ": the hub served commit ", metas[i].commit, ", expected ", info.commit);
  });
  std::map<std::string, Blob> blobs;
  for (size_t i = 0; i < res.files.size(); ++i) {
    auto& b = blobs[metas[i].etag];
    if (b.etag.empty()) b = Blob{metas[i].etag, res.files[i], metas[i].size};
  }
  std::vector<Blob> todo;
  int64_t already = 0;
  for (auto& [etag, b] : blobs) {
    if (b.size >= 0) res.bytes_total += b.size;
    const fs::path final_path = paths.blob(etag);
    if (fs::exists(final_path) && (b.size < 0 || size_or_zero(final_path) == b.size)) {
      already += size_or_zero(final_path);
      continue;
    }
    already += size_or_zero(paths.incomplete(etag));
    todo.push_back(b);
  }
  std::atomic<int64_t> fetched{0};
  {
    Progress progress(log, res.bytes_total, already, opt.terminal);
    cancel = false;
    try {
      run_parallel(todo.size(), opt.jobs, cancel, [&](size_t i) {
        fetch_blob(hub, paths, ref.repo_id, info.commit, todo[i], opt, progress, fetched, cancel);
        if (!opt.terminal) progress.note(str_cat("fetched ", todo[i].file, " (", human_bytes(todo[i].size), ")"));
      });
    } catch (...) {
      progress.finish(false);
      throw;
    }
    progress.finish(true);
  }
  for (size_t i = 0; i < res.files.size(); ++i) link_snapshot_file(paths, info.commit, res.files[i], metas[i].etag);
  if (ref.revision != info.commit) write_ref(paths, ref.revision, info.commit);
  res.bytes_fetched = fetched.load();
  return res;
}

}  // namespace ingot::registry
