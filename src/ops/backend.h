// The op vocabulary. Each device implements this interface; ops.h dispatches
// on the device of the inputs. Activations are rank-2 [rows, features] or
// rank-3 [tokens, heads, head_dim] contiguous tensors unless stated.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ops/weight.h"
#include "tensor/tensor.h"

namespace ingot {

enum class UnaryOp { Silu, GeluTanh, Gelu, Sigmoid, Exp, Tanh, Softplus, Neg, Square, Sqrt };
enum class BinaryOp { Add, Sub, Mul, Div };
enum class GluOp { SwiGlu, GeGluTanh, GeGlu };

// Rotary embedding for one layer type: inv_freq holds rotary_dim/2 frequencies.
struct RopeSpec {
  std::vector<float> inv_freq;
  int rotary_dim = 0;           // leading dims of each head that rotate
  float attention_scaling = 1;  // yarn / longrope magnitude factor on cos/sin
  bool interleaved = false;     // GPT-J pairs (x0,x1) instead of halves (rotate_half)
};

struct AttnParams {
  float scale = 1.0f;
  bool causal = true;
  // Absolute position of query row 0 within the key sequence: query i may see
  // key j when j <= q_offset + i (causal) and j > q_offset + i - window.
  int64_t q_offset = 0;
  int64_t window = 0;      // 0: unlimited
  float softcap = 0.0f;    // 0: none; else scores = cap * tanh(scores / cap)
  // Graph-replayable steps: when set, a device int32 (on the device of k) holding
  // the number of valid keys; k/v may be longer (reserved rows) and q_offset is
  // then kv_len - T. Only backends that capture steps read it.
  const int32_t* kv_len = nullptr;
  // Absolute position of key row 0 (a sliding-window store keeps only the
  // last rows): the CPU kernel cuts keys into tiles at absolute positions, so
  // such a store computes the bits of a full one.
  int64_t key_base = 0;
};

// One group of rows sharing a low-rank update (a LoRA adapter's pair for one
// projection): y[rows] += (x[rows] · aᵀ) · bt, a [r, K], bt [r, M] (Bᵀ: the
// expand factor laid out rank row by rank row, so the expand streams whole
// rows of outputs) with the adapter's scale already folded in. rows empty:
// every row of x.
struct LowRankGroup {
  const Weight* a = nullptr;
  const Weight* bt = nullptr;
  std::vector<int64_t> rows;
};

// One projection's output and the adapter groups that update it: projections
// reading the same input (q / k / v, gate / up) share one low_rank_add call.
struct LowRankOutput {
  Tensor* y = nullptr;
  std::vector<LowRankGroup> groups;
};

// A captured step of device work (a CUDA graph) that replays as one launch.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void replay() = 0;
};

// How gated_delta_rule folds a span of tokens into the state.
enum class DeltaRuleForm {
  Auto,       // chunked for spans longer than one token, recurrent otherwise
  Chunked,    // chunk-parallel (intra-chunk triangular solve, one state update per chunk)
  Recurrent,  // token by token
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // A weight as this device's kernels read it fastest, made once at load
  // (the CPU interleaves Q4_0 / Q4_1 rows); the same numbers either way.
  virtual Weight prepare_weight(const Weight& w) { return w; }
  // x [N, K] · wᵀ where w is [M, K] -> [N, M]; bias [M] optional.
  virtual Tensor linear(const Tensor& x, const Weight& w, const Tensor* bias) = 0;
  // General a [N, K] @ b [K, M] (both activations).
  virtual Tensor matmul(const Tensor& a, const Tensor& b) = 0;
  // linear() for many rows where only throughput matters: the numbers may
  // differ from linear()'s in the last bits (another summation order), so a
  // row computed here must never be compared with one from linear() (the
  // batch-invariance rule covers linear() only). Audio encoders use it.
  virtual Tensor linear_bulk(const Tensor& x, const Weight& w, const Tensor* bias) { return linear(x, w, bias); }
  // table [V, D] rows gathered by ids (i32 [N]) -> [N, D] in the activation dtype.
  virtual Tensor embedding(const Weight& table, const Tensor& ids) = 0;
  // Normalises over the last dim. unit_offset: weight is applied as (1 + w) (Gemma).
  virtual Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, bool unit_offset) = 0;
  virtual Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) = 0;
  // x [T, H, D] rotated in place at positions (i32 [T]).
  virtual void rope_inplace(Tensor& x, const Tensor& positions, const RopeSpec& spec) = 0;
  virtual Tensor softmax(const Tensor& x) = 0;  // over the last dim
  virtual Tensor unary(UnaryOp op, const Tensor& x) = 0;
  // b broadcasts when its shape is a suffix of a's or it has one element.
  virtual Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) = 0;
  virtual Tensor glu(GluOp op, const Tensor& gate, const Tensor& up) = 0;
  virtual Tensor scale(const Tensor& x, float s) = 0;
  virtual Tensor softcap(const Tensor& x, float cap) = 0;
  // q [T, H, D], k [S, KVH, D], v [S, KVH, Dv] -> [T, H, Dv]; H % KVH == 0 (GQA).
  virtual Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttnParams& p) = 0;
  // Greedy per PARITY.md: lowest id wins ties; a non-finite row gives 0. [N, V] -> i32 [N].
  virtual Tensor argmax(const Tensor& logits) = 0;
  virtual Tensor cast(const Tensor& x, DType dtype) = 0;
  // Gathers rows of x [N, ...] by i32 indices -> [len(idx), ...].
  virtual Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows) = 0;
  // Concatenates along dim 0.
  virtual Tensor concat_rows(const std::vector<Tensor>& parts) = 0;
  // The activation dtype this backend produces for a model stored in `weights`.
  virtual DType activation_dtype(DType weights) const = 0;

  // ---- Ops of the newer families (Gemma 4, Qwen3-MoE, Qwen3-Next/3.5). A
  // backend that lacks one reports it as unsupported on its device.
  // x * rsqrt(sum(x^2) + eps) over the last dim.
  virtual Tensor l2_norm(const Tensor& x, float eps);
  // Depthwise causal conv: x [T, C], w [C, K]; state [K-1, C] float32 holds the
  // previous inputs and is replaced by the last K-1 inputs. -> [T, C].
  virtual Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state);
  // Gated delta rule: q, k [T, Hk, Dk], v [T, Hv, Dv], g (log decay) and beta
  // [T, Hv]; Hv % Hk == 0 (each q/k head serves Hv/Hk consecutive v heads).
  // state [Hv, Dk, Dv] float32, updated in place. -> [T, Hv, Dv].
  virtual Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, Tensor& state, DeltaRuleForm form);
  // dst[rows[i]] += weights[i] * src[i] for i in order; dst [N, D], src [len(rows), D].
  virtual void scatter_add_rows(Tensor& dst, const Tensor& src, const std::vector<int64_t>& rows,
                                const std::vector<float>& weights);

  // For each output and each of its groups: y[rows] += (x[rows] · aᵀ) · bt,
  // in place; every y [N, M_y] float32 contiguous, x [N, K]. Rows of different
  // groups may interleave (a batch mixing adapters); a row in no group is left
  // as it is. The default is, per group, a shrink (one linear on its gathered
  // rows) then an expand scattered back, composed from linear / gather_rows /
  // matmul / scatter_add_rows.
  virtual void low_rank_add(const std::vector<LowRankOutput>& outs, const Tensor& x);

  // ---- Fused forms of common sequences; the defaults compose the plain ops,
  // so a backend overrides them only where one kernel does the work of several.
  // residual + linear(x, w, bias)
  virtual Tensor linear_residual(const Tensor& x, const Weight& w, const Tensor* bias, const Tensor& residual);
  // glu(op, linear(x, gate, gate_bias), linear(x, up, up_bias))
  virtual Tensor glu_linear(GluOp op, const Tensor& x, const Weight& gate, const Weight& up, const Tensor* gate_bias,
                            const Tensor* up_bias);

  // [linear(x, w[i], bias[i]) for each i]: several weights reading one input (q/k/v), which a
  // backend may read in one launch. bias may be empty or hold null entries.
  virtual std::vector<Tensor> linear_many(const Tensor& x, const std::vector<const Weight*>& w,
                                          const std::vector<const Tensor*>& bias);

  // rope_inplace(a, ...) then rope_inplace(b, ...) at the same positions (q and k).
  virtual void rope_pair_inplace(Tensor& a, Tensor& b, const Tensor& positions, const RopeSpec& spec);

  // ---- Graph-replayable steps (stepgraph/greedy_step.h). Backends that cannot
  // capture return nullptr from capture_step and report the rest unsupported.
  // Records the device work `step` queues into a graph; nothing runs until replay().
  virtual std::unique_ptr<StepGraph> capture_step(const std::function<void()>& step);
  // dst[rows[i]] = src[i] along dim 0; rows is i32 [len] on the device.
  virtual void write_rows_at(Tensor& dst, const Tensor& src, const Tensor& rows);
  // write_rows_at(dst0, src0, rows) then write_rows_at(dst1, src1, rows) (K and V rows).
  virtual void write_rows_at_pair(Tensor& dst0, const Tensor& src0, Tensor& dst1, const Tensor& src1,
                                  const Tensor& rows);
  // x += v elementwise, x int32 in place.
  virtual void add_i32_inplace(Tensor& x, int32_t v);
};

void register_backend(Device d, Backend* b);
Backend& backend(Device d);
bool has_backend(Device d);

}  // namespace ingot
