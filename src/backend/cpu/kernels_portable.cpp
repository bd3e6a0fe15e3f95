// Portable level (baseline x86-64 / any CPU): 8 lanes in plain C++, no
// fused multiply-add, so it runs anywhere and serves as the reference order.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/isa_table.h"
#include "tensor/half.h"

namespace ingot::cpu {
namespace {

struct VPortable {
  struct R {
    float v[8];
  };
  static constexpr int W = 8;
  static constexpr int MX = 2;
  static constexpr int PX = 2;
  static constexpr bool kReduce16 = false;
  static void reduce16(const R*, float*) {}
  static constexpr bool kReduce8 = false;
  static void reduce8(const R*, float*) {}
  static constexpr bool kReduce8Tree = false;
  static void reduce8_tree(const R*, float*) {}
  static R zero() { return R{}; }
  static R load(const float* p) {
    R r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static R load_bf16(const uint16_t* p) {
    R r;
    for (int i = 0; i < W; ++i) r.v[i] = bf16_to_f32(p[i]);
    return r;
  }
  static R load_f16(const uint16_t* p) {
    R r;
    for (int i = 0; i < W; ++i) r.v[i] = f16_to_f32(p[i]);
    return r;
  }
  static R fma(R a, R b, R c) {
    for (int i = 0; i < W; ++i) c.v[i] = c.v[i] + a.v[i] * b.v[i];
    return c;
  }
  static R add(R a, R b) {
    for (int i = 0; i < W; ++i) a.v[i] += b.v[i];
    return a;
  }
  static R sub(R a, R b) {
    for (int i = 0; i < W; ++i) a.v[i] -= b.v[i];
    return a;
  }
  static R div(R a, R b) {
    for (int i = 0; i < W; ++i) a.v[i] /= b.v[i];
    return a;
  }
  static R exp(R a) {
    for (float& v : a.v) v = std::exp(v);
    return a;
  }
  static R mul(R a, R b) {
    for (int i = 0; i < W; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static R max(R a, R b) {
    for (int i = 0; i < W; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
    return a;
  }
  // Lanes whose x has the sign bit set take a, the others b.
  static R select_neg(R x, R a, R b) {
    for (int i = 0; i < W; ++i) b.v[i] = std::signbit(x.v[i]) ? a.v[i] : b.v[i];
    return b;
  }
  static R set1(float x) {
    R r;
    for (float& v : r.v) v = x;
    return r;
  }
  static void store(float* p, R r) { std::memcpy(p, r.v, sizeof(r.v)); }
  static float reduce(R r) {
    float s4[4], s2[2];
    for (int i = 0; i < 4; ++i) s4[i] = r.v[i] + r.v[i + 4];
    for (int i = 0; i < 2; ++i) s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
  }
  static void prefetch(const void* p) { __builtin_prefetch(p); }
  static void pin(R&) {}
};

#include "backend/cpu/kernels_impl.h"

}  // namespace

const KernelTable& kernels_portable() {
  static const KernelTable t = make_table<VPortable>("portable");
  return t;
}

}  // namespace ingot::cpu
