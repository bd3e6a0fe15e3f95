#include "registry/hashing.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "util/error.h"

namespace ingot::registry {

namespace {

struct Digest {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  explicit Digest(const EVP_MD* md) {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) fail(ErrorKind::Internal, "cannot start a digest");
  }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx.get(), p, n); }
  std::string hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx.get(), out, &n);
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < n; ++i) {
      s += digits[out[i] >> 4];
      s += digits[out[i] & 15];
    }
    return s;
  }
};

void hash_file_into(Digest& d, const fs::path& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) fail(ErrorKind::Io, "cannot read ", path.string());
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) d.update(buf.data(), n);
  if (std::ferror(f.get())) fail(ErrorKind::Io, "read error on ", path.string());
}

std::string git_header(uintmax_t size) {
  std::string h = "blob " + std::to_string(size);
  h.push_back('\0');
  return h;
}

}  // namespace

std::string sha256_file(const fs::path& path) {
  Digest d(EVP_sha256());
  hash_file_into(d, path);
  return d.hex();
}

std::string git_blob_sha1_file(const fs::path& path) {
  Digest d(EVP_sha1());
  std::string h = git_header(fs::file_size(path));
  d.update(h.data(), h.size());
  hash_file_into(d, path);
  return d.hex();
}

std::string sha256_hex(const std::string& data) {
  Digest d(EVP_sha256());
  d.update(data.data(), data.size());
  return d.hex();
}

std::string git_blob_sha1_hex(const std::string& data) {
  Digest d(EVP_sha1());
  std::string h = git_header(data.size());
  d.update(h.data(), h.size());
  d.update(data.data(), data.size());
  return d.hex();
}

bool content_matches_etag(const fs::path& path, const std::string& etag) {
  std::string lower;
  for (char c : etag) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  switch (classify_etag(etag)) {
    case EtagKind::Sha256: return sha256_file(path) == lower;
    case EtagKind::GitSha1: return git_blob_sha1_file(path) == lower;
    case EtagKind::Opaque: return true;
  }
  return true;
}

}  // namespace ingot::registry
