// Content hashes the hub's etags are made of (OpenSSL libcrypto).
#pragma once
#include <string>

#include "registry/cache_layout.h"

namespace ingot::registry {

// Lower-case hex sha256 of a file's bytes.
std::string sha256_file(const fs::path& path);
// Git's blob id: sha1 of "blob <size>\0" followed by the bytes.
std::string git_blob_sha1_file(const fs::path& path);
std::string sha256_hex(const std::string& data);
std::string git_blob_sha1_hex(const std::string& data);

// Whether a file's content matches its etag; Opaque etags cannot be checked (true).
bool content_matches_etag(const fs::path& path, const std::string& etag);

}  // namespace ingot::registry
