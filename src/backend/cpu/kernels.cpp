#include "backend/cpu/kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/isa_table.h"
#include "backend/cpu/thread_pool.h"
#include "util/error.h"

namespace ingot::cpu {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    c.avx512vnni = __builtin_cpu_supports("avx512vnni");
    // AVX-VNNI: CPUID leaf 7 sub-leaf 1, EAX bit 4 (read directly: older
    // clang does not know the "avxvnni" feature name); it needs the AVX state.
    unsigned a = 0, b = 0, cx = 0, d = 0;
    c.avxvnni = c.avx2 && __get_cpuid_count(7, 1, &a, &b, &cx, &d) && (a & (1u << 4)) != 0;
    c.f16c = c.avx2;  // every AVX2 CPU we target has F16C
    return c;
  }();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable:
      return "portable";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

std::vector<Isa> supported_isas() {
  const CpuFeatures& f = cpu_features();
  std::vector<Isa> out{Isa::Portable};
  if (f.avx2 && f.fma && f.f16c) out.push_back(Isa::Avx2);
  if (f.avx512f && f.avx512bw && f.avx512vl && f.fma) out.push_back(Isa::Avx512);
  return out;
}

namespace {

bool is_supported(Isa isa) {
  for (Isa s : supported_isas())
    if (s == isa) return true;
  return false;
}

Isa startup_isa() {
  Isa best = supported_isas().back();
  const char* env = std::getenv("INGOT_CPU_ISA");
  if (!env || !*env) return best;
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (std::string(env) == isa_name(isa)) return is_supported(isa) ? isa : best;
  return best;
}

const KernelTable& table_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return kernels_avx512();
    case Isa::Avx2:
      return kernels_avx2();
    default:
      return kernels_portable();
  }
}

std::atomic<const KernelTable*> g_table{nullptr};
std::atomic<int> g_isa{-1};

const KernelTable& kt() {
  const KernelTable* t = g_table.load(std::memory_order_acquire);
  if (t) return *t;
  Isa isa = startup_isa();
  g_isa.store(static_cast<int>(isa));
  g_table.store(&table_for(isa), std::memory_order_release);
  return table_for(isa);
}

}  // namespace

Isa active_isa() {
  kt();
  return static_cast<Isa>(g_isa.load());
}

void set_isa(Isa isa) {
  if (!is_supported(isa)) fail(ErrorKind::Unsupported, "this CPU cannot run the ", isa_name(isa), " kernels");
  g_isa.store(static_cast<int>(isa));
  g_table.store(&table_for(isa), std::memory_order_release);
}

void reset_isa() { set_isa(startup_isa()); }

void to_f32(const void* src, DType t, int64_t n, float* dst) {
  if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
    fail(ErrorKind::Unsupported, "to_f32 from ", dtype_name(t));
  kt().to_f32(src, t, n, dst);
}

float dot(const float* a, const void* b, DType bdt, int64_t k) { return kt().dot(a, b, bdt, k); }
void axpy(float a, const void* x, DType xdt, float* y, int64_t n) { kt().axpy(a, x, xdt, y, n); }
void dot_rows(const float* a, const void* b, DType bdt, int64_t ldb, int64_t rows, int64_t k, float* out) {
  kt().dot_rows(a, b, bdt, ldb, rows, k, out);
}
void silu_mul(const float* g, const float* u, float* y, int64_t n) { kt().silu_mul(g, u, y, n); }
void gelu(const float* x, float* y, int64_t n) { kt().gelu(x, y, n); }
void softmax_row(const float* x, float* y, int64_t n) { kt().softmax(x, y, n); }
void layer_norm_row(const float* x, const float* w, const float* b, float eps, float* y, int64_t n) {
  kt().layer_norm(x, w, b, eps, y, n);
}
void attn_fold(const AttnFold& f) { kt().attn_fold(f); }
int attn_block_vectors() { return kt().attn_block_vectors; }
float sum_squares(const float* x, int64_t n) { return kt().sum_squares(x, n); }
float sum(const float* x, int64_t n) { return kt().sum(x, n); }
void scale_by(const float* x, float s, const float* w, bool unit_offset, float* y, int64_t n) {
  kt().scale_by(x, s, w, unit_offset, y, n);
}

namespace {
QuantKernels g_quant[32];
bool g_quant_set[32] = {false};
}  // namespace

void register_quant_kernels(DType key, QuantKernels k) {
  g_quant[static_cast<int>(key)] = k;
  g_quant_set[static_cast<int>(key)] = true;
}

const QuantKernels* quant_kernels(DType key) {
  return g_quant_set[static_cast<int>(key)] ? &g_quant[static_cast<int>(key)] : nullptr;
}

namespace {
// Both dense products take f32 / bf16 / f16 weight rows.
void check_dense_weights(DType wdt) {
  if (wdt != DType::F32 && wdt != DType::BF16 && wdt != DType::F16)
    fail(ErrorKind::Unsupported, "dense linear on ", dtype_name(wdt), " weights");
}
}  // namespace

void linear_dense(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw, int64_t m,
                  float* y) {
  check_dense_weights(wdt);
  if (n <= 0 || m <= 0) return;
  const KernelTable& t = kt();
  const size_t es = dtype_size(wdt);
  // Work is split over weight rows only, in units of whole panels: each
  // thread streams its own slice of W once. The split never changes the
  // arithmetic of a single (row, column) dot.
  constexpr int64_t kUnit = kMaxPanelRows;
  const int64_t units = (m + kUnit - 1) / kUnit;
  // Many small chunks, claimed dynamically: on a shared machine a thread that
  // is descheduled holds up the whole step only for one small chunk.
  const int64_t chunks = std::min<int64_t>(units, 16 * static_cast<int64_t>(pool().size()));
  const int64_t per = (units + chunks - 1) / chunks;
  pool().run(chunks, [&](int64_t c) {
    const int64_t ub = c * per, ue = std::min(units, ub + per);
    if (ub >= ue) return;
    thread_local std::vector<float> scratch;
    const size_t need = static_cast<size_t>(linear_scratch_floats(k));
    if (scratch.size() < need) scratch.resize(need);
    const int64_t j0 = ub * kUnit, j1 = std::min(m, ue * kUnit);
    LinearBlock b{
        x,   k,   n,       k,      static_cast<const uint8_t*>(w) + static_cast<size_t>(j0 * ldw) * es,
        wdt, ldw, j1 - j0, y + j0, m};
    t.linear_block(b, scratch.data());
  });
}

void linear_bulk(const float* x, int64_t n, int64_t k, const void* w, DType wdt, int64_t ldw, int64_t m,
                 float* y) {
  check_dense_weights(wdt);
  if (n <= 0 || m <= 0) return;
  const KernelTable& t = kt();
  const size_t es = dtype_size(wdt);
  // Tasks are blocks of rows x columns. Each packs its weight columns
  // (kCols x kBulkK) once per k block, so rows are split only as far as
  // needed to give every thread several tasks (one attention head's 64
  // columns still spreads).
  constexpr int64_t kCols = 64;
  const int64_t cb = (m + kCols - 1) / kCols;
  const int64_t want = 4 * static_cast<int64_t>(pool().size());
  const int64_t rb = std::min((n + 5) / 6, std::max<int64_t>(1, (want + cb - 1) / cb));
  const int64_t kRows = ((n + rb - 1) / rb + 5) / 6 * 6;
  pool().run(((n + kRows - 1) / kRows) * cb, [&](int64_t task) {
    const int64_t i0 = task / cb * kRows, j0 = task % cb * kCols;
    thread_local std::vector<float> scratch;
    const size_t need = static_cast<size_t>(bulk_scratch_floats(kCols));
    if (scratch.size() < need) scratch.resize(need);
    LinearBlock b{x + i0 * k,
                  k,
                  std::min(kRows, n - i0),
                  k,
                  static_cast<const uint8_t*>(w) + static_cast<size_t>(j0 * ldw) * es,
                  wdt,
                  ldw,
                  std::min(kCols, m - j0),
                  y + i0 * m + j0,
                  m};
    t.linear_bulk_block(b, scratch.data());
  });
}

}  // namespace ingot::cpu
