// Q8_0 / Q4_0 / Q4_1 weights re-laid for the CPU's integer dot kernels: rows
// in groups of 8 (DType::Q8_0x8 / Q4_0x8 / Q4_1x8). One block of a group
// (the 8 rows' blocks of the same 32 columns) holds the rows' f16 fields
// field by field (d[8], then Q4_1's m[8]), then runs of 32 bytes: run t holds
// bytes 4t..4t+3 of each row's value bytes (16 nibble bytes, or Q8_0's 32
// int8), row r at bytes 4r..4r+3.
// So one 32-byte load covers 8 rows and one broadcast of 4 activation bytes
// multiplies all of them (a Q4 run's low nibbles are values 4t..4t+3 of each
// row, its high nibbles values 16+4t..16+4t+3); the 8 scales load as one
// vector. A group's blocks follow each other in column order, so the group
// spans exactly the bytes its 8 rows span in the file's layout.
#pragma once
#include <cstdint>

#include "ops/weight.h"

namespace ingot::quant {

constexpr int kGroupRows = 8;

// The layout of one file format's blocks and of its interleaved groups.
struct GroupLayout {
  int fields;       // f16 fields per row block (d; Q4_1: d, m)
  int value_bytes;  // value bytes per row block
  constexpr int row_block() const { return 2 * fields + value_bytes; }
  constexpr int runs_offset() const { return 2 * fields * kGroupRows; }
  constexpr int group_block() const { return row_block() * kGroupRows; }
};
constexpr GroupLayout kQ8_0Groups{1, 32}, kQ4_0Groups{1, 16}, kQ4_1Groups{2, 16};

// Whether interleave_rows applies: a contiguous Q8_0 / Q4_0 / Q4_1 weight on
// the host whose rows come in whole groups.
bool can_interleave(const Weight& w);
// The weight in the interleaved layout (a new host buffer); w itself when
// can_interleave(w) is false.
Weight interleave_rows(const Weight& w);
// Rebuilds row `lane` (0..7) of one group block as a file-layout block in out.
void row_block_of_group(const uint8_t* group_block, const GroupLayout& l, int lane, uint8_t* out);

}  // namespace ingot::quant
