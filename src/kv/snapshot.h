// SSD snapshots of an immutable (published) prefix of a paged sequence.
//
// File: one header page block (magic, JSON length, header and payload
// XXH3-64 hashes, then JSON metadata: key, geometry, token ids, payload layout),
// padded to 4 KiB, then the payload: for every paged layer its four block
// regions (K codes, K params, V codes, V params), each the sequence's blocks
// in table order (a KV4 layer whose prefix ends inside its open block adds
// that block's exact float32 K and V rows, "kept" = 1), and for every
// sliding-window (rotating) layer its kept K and V rows; each region padded
// to 4 KiB. The magic's last byte is the format version (now 2); other
// versions are refused with a clear error. That is exactly a pool slab's layout,
// so a restore maps the payload and the pool adopts the mapping as a slab: no
// copy. The payload hash is XXH3-64 over the XXH3-64s of its 8 MiB chunks, so
// a restore checks the chunks on every core. A write gathers a host pool's
// blocks with pwritev straight from their memory (no staging copy); a device
// pool's blocks are downloaded into pinned staging beside the engine's stream.
// A device pool restores by checking the mapping the same way and uploading
// it into one new device buffer, which the pool adopts as its slabs.
//
// Writes are atomic: a temp file in the same directory, fsync, rename, fsync
// of the directory. Any mismatch (model, tokenizer, scheme, block size,
// quantization, layout) or a corrupt or truncated file is refused with a
// clear error before anything touches the pool.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kv/pool.h"

namespace ingot::kv {

// What a snapshot must match to be restored: the model's fingerprint, the
// tokenizer's, and the KV scheme (Pool::scheme()).
struct SnapshotKey {
  std::string model;
  std::string tokenizer;
  std::string scheme;
  bool operator==(const SnapshotKey&) const = default;
};

struct SnapshotInfo {
  SnapshotKey key;
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
};

struct SnapshotWriteHooks {
  // Called after each write batch with the file offset reached (tests). The
  // payload goes first, the header page last.
  std::function<void(uint64_t)> progress;
};

// Writes the first `tokens.size()` tokens of `seq` (every layer paged, from
// one pool) atomically to `path`. Returns the bytes written.
uint64_t write_snapshot(const std::string& path, const SequenceCache& seq, const std::vector<int32_t>& tokens,
                        const SnapshotKey& key, const SnapshotWriteHooks& hooks = {});

// Reads and checks only the header (used to index a directory).
SnapshotInfo read_snapshot_info(const std::string& path);

// Restores into `pool` (which must match the snapshot's geometry and `key`).
std::unique_ptr<SequenceCache> restore_snapshot(const std::string& path, Pool& pool, const SnapshotKey& key,
                                                std::vector<int32_t>* tokens = nullptr);

// A stable fingerprint string for a model's cache layout plus any caller
// identity (weights hash, name): a snapshot never crosses models.
std::string layout_fingerprint(const std::vector<LayerSpec>& layers, DType dtype, const std::string& identity);

}  // namespace ingot::kv
