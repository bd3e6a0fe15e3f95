#include "registry/hub_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::registry {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string escape(const std::string& s) {
  std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
  char* e = curl_easy_escape(h.get(), s.c_str(), static_cast<int>(s.size()));
  std::string out = e ? e : s;
  curl_free(e);
  return out;
}

// A file path keeps its '/' separators; every segment is escaped.
std::string escape_path(const std::string& file) {
  std::string out;
  for (const auto& part : split(file, '/')) {
    if (!out.empty()) out.push_back('/');
    out += escape(part);
  }
  return out;
}

// Headers of the last response (a redirect chain resets them per hop).
struct HeaderSink {
  std::map<std::string, std::string> headers;
  static size_t cb(char* data, size_t size, size_t n, void* self) {
    auto* s = static_cast<HeaderSink*>(self);
    std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
      s->headers.clear();
    } else if (size_t colon = line.find(':'); colon != std::string::npos) {
      s->headers[lower(line.substr(0, colon))] = std::string(trim(line.substr(colon + 1)));
    }
    return size * n;
  }
  std::string get(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct Easy {
  std::unique_ptr<CURL, void (*)(CURL*)> h{nullptr, curl_easy_cleanup};
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> hdrs{nullptr, curl_slist_free_all};
  HeaderSink sink;
  char errbuf[CURL_ERROR_SIZE] = {0};

  Easy(const HubConfig& hub, const std::string& url) {
    global_init();
    h.reset(curl_easy_init());
    if (!h) fail(ErrorKind::Internal, "curl_easy_init failed");
    curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(h.get(), CURLOPT_USERAGENT, "ingot");
    curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled transfer (under 1 byte/s for a minute) is a network failure, not a hang.
    curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h.get(), CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h.get(), CURLOPT_HEADERFUNCTION, &HeaderSink::cb);
    curl_easy_setopt(h.get(), CURLOPT_HEADERDATA, &sink);
    if (!hub.token.empty()) add_header("Authorization: Bearer " + hub.token);
  }
  void add_header(const std::string& line) {
    hdrs.reset(curl_slist_append(hdrs.release(), line.c_str()));
    curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, hdrs.get());
  }
  long status() {
    long code = 0;
    curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
  std::string error_text(CURLcode rc) const { return errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc); }
};

size_t collect_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

std::string hub_error_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return "";
}

[[noreturn]] void fail_for_status(long status, const HeaderSink& hs, const std::string& body, const RepoRef& ref,
                                  const HubConfig& hub) {
  const std::string code = hs.get("x-error-code"), msg = hub_error_message(body);
  if (code == "RevisionNotFound" || (status == 404 && lower(msg).find("revision") != std::string::npos))
    fail(ErrorKind::NotFound, "revision '", ref.revision, "' not found in ", ref.repo_id);
  if (code == "RepoNotFound" || status == 404 || status == 401)
    fail(ErrorKind::NotFound, "repository ", ref.repo_id, " not found on ", hub.endpoint,
         status == 401 && hub.token.empty() ? " (private or gated repositories need HF_TOKEN)" : "");
  if (code == "GatedRepo" || status == 403)
    fail(ErrorKind::InvalidArgument, "access to ", ref.repo_id, " is restricted",
         hub.token.empty() ? ": accept its terms on the hub and set HF_TOKEN" : " for this HF_TOKEN",
         msg.empty() ? "" : " (" + msg + ")");
  fail(ErrorKind::Io, "the hub answered HTTP ", status, " for ", ref.repo_id, msg.empty() ? "" : ": " + msg);
}

std::string read_token_file(const fs::path& p) {
  if (!file_exists(p.string())) return "";
  return std::string(trim(read_text_file(p.string())));
}

// Write side of a ranged download: decides on the first body byte whether
// the server honoured the Range, then appends.
struct FileSink {
  Easy* easy = nullptr;
  int fd = -1;
  int64_t offset = 0;
  bool started = false, writing = false;
  int write_errno = 0;
  std::string error_body;
  const std::function<void(int64_t)>* on_bytes = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled = false;

  static size_t cb(char* data, size_t size, size_t n, void* self) {
    auto* s = static_cast<FileSink*>(self);
    const size_t len = size * n;
    if (s->cancel->load()) {
      s->cancelled = true;
      return 0;
    }
    if (!s->started) {
      s->started = true;
      const long st = s->easy->status();
      if (st == 206) {
        s->writing = true;
      } else if (st == 200) {
        // The Range was ignored: the body is the whole file.
        if (ftruncate(s->fd, 0) != 0) return s->io_error();
        (*s->on_bytes)(-s->offset);
        s->offset = 0;
        s->writing = true;
      }
      if (s->writing && lseek(s->fd, s->offset, SEEK_SET) < 0) return s->io_error();
    }
    if (!s->writing) {
      if (s->error_body.size() < 4096) s->error_body.append(data, len);
      return len;
    }
    size_t done = 0;
    while (done < len) {
      ssize_t w = ::write(s->fd, data + done, len - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        return s->io_error();
      }
      done += static_cast<size_t>(w);
    }
    (*s->on_bytes)(static_cast<int64_t>(len));
    return len;
  }
  size_t io_error() {
    write_errno = errno;
    return 0;
  }
};

// "https://host:port" of an endpoint that may carry a path.
std::string origin_of(const std::string& endpoint) {
  size_t scheme = endpoint.find("://");
  size_t path = endpoint.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return path == std::string::npos ? endpoint : endpoint.substr(0, path);
}

}  // namespace

HubConfig HubConfig::from_env() {
  HubConfig h;
  if (const char* e = std::getenv("HF_ENDPOINT"); e && *e) h.endpoint = e;
  while (!h.endpoint.empty() && h.endpoint.back() == '/') h.endpoint.pop_back();
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) {
    h.token = t;
  } else if (const char* p = std::getenv("HF_TOKEN_PATH"); p && *p) {
    h.token = read_token_file(p);
  } else if (const char* home = std::getenv("HF_HOME"); home && *home) {
    h.token = read_token_file(fs::path(home) / "token");
  } else if (const char* uh = std::getenv("HOME"); uh && *uh) {
    h.token = read_token_file(fs::path(uh) / ".cache" / "huggingface" / "token");
  }
  h.cache_dir = hub_cache_dir();
  return h;
}

RevisionInfo fetch_revision(const HubConfig& hub, const RepoRef& ref) {
  const std::string url = hub.endpoint + "/api/models/" + ref.repo_id + "/revision/" + escape(ref.revision);
  Easy e(hub, url);
  std::string body;
  curl_easy_setopt(e.h.get(), CURLOPT_WRITEFUNCTION, &collect_body);
  curl_easy_setopt(e.h.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(e.h.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e.h.get(), CURLOPT_TIMEOUT, 120L);
  CURLcode rc = curl_easy_perform(e.h.get());
  if (rc != CURLE_OK) fail(ErrorKind::Io, "cannot reach ", hub.endpoint, ": ", e.error_text(rc));
  const long st = e.status();
  if (st != 200) fail_for_status(st, e.sink, body, ref, hub);
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string())
    fail(ErrorKind::BadFormat, "the hub's answer for ", ref.repo_id, " has no commit sha");
  RevisionInfo info;
  info.commit = j["sha"].get<std::string>();
  if (!is_commit_hash(info.commit)) fail(ErrorKind::BadFormat, "the hub gave a malformed commit '", info.commit, "'");
  if (j.contains("siblings") && j["siblings"].is_array())
    for (const auto& s : j["siblings"])
      if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string())
        info.files.push_back(s["rfilename"].get<std::string>());
  return info;
}

std::string resolve_url(const HubConfig& hub, const std::string& repo_id, const std::string& commit,
                        const std::string& file) {
  return hub.endpoint + "/" + repo_id + "/resolve/" + commit + "/" + escape_path(file);
}

FileMeta head_file(const HubConfig& hub, const std::string& repo_id, const std::string& commit,
                   const std::string& file) {
  std::string url = resolve_url(hub, repo_id, commit, file);
  std::unique_ptr<Easy> easy;
  long st = 0;
  for (int hop = 0;; ++hop) {
    easy = std::make_unique<Easy>(hub, url);
    easy->add_header("Accept-Encoding: identity");
    curl_easy_setopt(easy->h.get(), CURLOPT_NOBODY, 1L);
    curl_easy_setopt(easy->h.get(), CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(easy->h.get());
    if (rc != CURLE_OK)
      fail(ErrorKind::Io, "cannot reach ", hub.endpoint, " for ", file, ": ", easy->error_text(rc));
    st = easy->status();
    // A renamed repo answers with a relative redirect to its new name on the hub itself (followed);
    // an LFS file's absolute redirect to the CDN carries the metadata already (not followed).
    const std::string loc = easy->sink.get("location");
    if (st >= 300 && st < 400 && loc.starts_with("/") && easy->sink.get("x-linked-etag").empty() && hop < 5) {
      url = origin_of(hub.endpoint) + loc;
      continue;
    }
    break;
  }
  Easy& e = *easy;
  if (st == 404) fail(ErrorKind::NotFound, repo_id, ": file '", file, "' not found at commit ", commit);
  if (st >= 400) fail(ErrorKind::Io, "the hub answered HTTP ", st, " for ", repo_id, "/", file);
  FileMeta m;
  std::string etag = e.sink.get("x-linked-etag");
  if (etag.empty()) etag = e.sink.get("etag");
  m.etag = normalize_etag(etag);
  m.commit = e.sink.get("x-repo-commit");
  std::string size = e.sink.get("x-linked-size");
  if (size.empty() && st < 300) size = e.sink.get("content-length");
  if (!size.empty()) m.size = std::strtoll(size.c_str(), nullptr, 10);
  if (m.etag.empty()) fail(ErrorKind::BadFormat, "the hub sent no ETag for ", repo_id, "/", file);
  if (m.etag.find('/') != std::string::npos || m.etag == "." || m.etag == "..")
    fail(ErrorKind::BadFormat, "the hub sent a malformed ETag for ", repo_id, "/", file);
  return m;
}

TransferResult fetch_to_file(const HubConfig& hub, const std::string& url, const fs::path& path, int64_t offset,
                             const std::function<void(int64_t)>& on_bytes, const std::atomic<bool>& cancel) {
  TransferResult r;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    r.error = str_cat("cannot write ", path.string(), ": ", std::strerror(errno));
    return r;
  }
  Easy e(hub, url);
  e.add_header("Accept-Encoding: identity");
  if (offset > 0) e.add_header("Range: bytes=" + std::to_string(offset) + "-");
  FileSink sink;
  sink.easy = &e;
  sink.fd = fd;
  sink.offset = offset;
  sink.on_bytes = &on_bytes;
  sink.cancel = &cancel;
  curl_easy_setopt(e.h.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e.h.get(), CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e.h.get(), CURLOPT_WRITEFUNCTION, &FileSink::cb);
  curl_easy_setopt(e.h.get(), CURLOPT_WRITEDATA, &sink);
  CURLcode rc = curl_easy_perform(e.h.get());
  const long st = e.status();
  const bool closed_ok = ::close(fd) == 0;
  if (sink.write_errno != 0) {
    const int en = sink.write_errno;
    r.error = str_cat("cannot write ", path.string(), ": ", std::strerror(en),
                      en == ENOSPC || en == EFBIG || en == EDQUOT ? " (the disk is full or over its limit)" : "");
    return r;
  }
  if (sink.cancelled) {
    r.error = "cancelled";
    return r;
  }
  if (rc != CURLE_OK) {
    r.retryable = true;
    r.error = str_cat("network error: ", e.error_text(rc));
    return r;
  }
  if (st == 416) {
    // Nothing left to send from `offset`: start over.
    r.retryable = true;
    r.error = "the server rejected the resume offset";
    if (truncate(path.c_str(), 0) == 0) on_bytes(-offset);
    return r;
  }
  if (st != 200 && st != 206) {
    r.retryable = st >= 500;
    std::string msg = hub_error_message(sink.error_body);
    r.error = str_cat("HTTP ", st, msg.empty() ? "" : ": " + msg);
    return r;
  }
  if (!closed_ok) {
    r.error = str_cat("cannot write ", path.string(), ": ", std::strerror(errno));
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace ingot::registry
