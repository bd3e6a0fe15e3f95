// Whisper (encoder-decoder speech model): conv stem + transformer encoder,
// decoder with causal self-attention (KV cache) and cross-attention whose
// K/V are computed once per audio window and shared by every sequence
// decoded against it (temperature fallback, beams, language detection,
// word alignment).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/config.h"
#include "kv/cache.h"
#include "models/weights.h"

namespace ingot {

struct WhisperConfig {
  int64_t d_model = 0, vocab_size = 0, num_mel_bins = 80;
  int64_t encoder_layers = 0, decoder_layers = 0, encoder_heads = 0, decoder_heads = 0;
  int64_t max_source_positions = 1500, max_target_positions = 448;
  bool scale_embedding = false;
  std::string activation = "gelu";
};

// How the weights are held in memory.
enum class WhisperPrecision {
  Float,  // as loaded (LoadOptions::dtype)
  // The decoder's matrices and the output projection as Q8_0 (int8 with a
  // scale per 32 values). A decoder step multiplies one row per sequence, so
  // it is bound by reading weights and int8 reads a quarter of float32. The
  // encoder and the cross-attention K/V projections multiply 1500 rows at a
  // time, where float32 FMA does as many multiply-adds per cycle as int8
  // dot products on CPUs without VNNI: they stay float.
  Int8,
};
WhisperPrecision parse_whisper_precision(const std::string& s);  // "float32" | "int8"

class WhisperModel {
 public:
  static std::unique_ptr<WhisperModel> load(const std::string& dir, const LoadOptions& opt = {},
                                            WhisperPrecision precision = WhisperPrecision::Float);
  WhisperModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt, WhisperPrecision precision);

  const WhisperConfig& config() const { return wc_; }
  const ModelConfig& model_config() const { return cfg_; }
  Device device() const { return device_; }
  WhisperPrecision precision() const { return precision_; }

  // mel [n_mels, 2 * max_source_positions] -> encoder states [max_source_positions, d].
  Tensor encode(const Tensor& mel) const;

  // The cross-attention K/V of every decoder layer for one window's encoder
  // states, each [source, heads, head_dim].
  struct CrossKV {
    std::vector<Tensor> k, v;
  };
  std::shared_ptr<const CrossKV> cross_kv(const Tensor& encoder_out) const;

  // One decoder sequence: its self-attention cache and the window's cross K/V.
  struct DecoderState {
    std::unique_ptr<kv::SequenceCache> self;
    std::shared_ptr<const CrossKV> cross;
    int64_t length() const { return self ? self->offset() : 0; }
    DecoderState clone() const { return {self->clone(), cross}; }
  };
  DecoderState start(std::shared_ptr<const CrossKV> cross) const;
  DecoderState start(const Tensor& encoder_out) const { return start(cross_kv(encoder_out)); }
  // Feeds `tokens`; returns logits [tokens, vocab] (all rows) or [1, vocab].
  Tensor decode(DecoderState& st, const std::vector<int32_t>& tokens, bool all_logits = false) const;
  // Feeds `tokens`; returns the logits of the given rows of them [rows.size(), vocab].
  Tensor decode_rows(DecoderState& st, const std::vector<int32_t>& tokens, const std::vector<int64_t>& rows) const;
  // One token for each of several sequences of one window (beams, best-of
  // samples): the matrices multiply all rows at once. Returns [B, vocab];
  // row i equals decode(*states[i], {tokens[i]}).
  Tensor decode_step(const std::vector<DecoderState*>& states, const std::vector<int32_t>& tokens) const;

  // Cross-attention scores of the given (layer, head) pairs while the
  // decoder reads `tokens` from the start: one [tokens, source] float32
  // tensor per pair, scaled q·k before the softmax (word timestamps take
  // the softmax over the frames that hold audio, and align text with it).
  std::vector<Tensor> cross_attention_weights(std::shared_ptr<const CrossKV> cross, const std::vector<int32_t>& tokens,
                                              const std::vector<std::pair<int, int>>& heads) const;

 private:
  struct Attn {
    Weight q, k, v, o;
    Tensor qb, vb, ob;
  };
  struct EncLayer {
    Tensor ln1_w, ln1_b, ln2_w, ln2_b;
    Attn attn;
    Tensor enc_ob;  // out-projection bias with V's bias folded in (encoder_attention_cpu)
    Weight fc1, fc2;
    Tensor fc1_b, fc2_b;
  };
  struct DecLayer {
    Tensor ln1_w, ln1_b, lnx_w, lnx_b, ln2_w, ln2_b;
    Attn self_attn, cross_attn;
    Weight fc1, fc2;
    Tensor fc1_b, fc2_b;
  };
  // Where a decoder pass sends the cross-attention queries of one layer
  // (cross_attention_weights), if anywhere.
  using CrossQueryTap = std::function<void(int layer, const Tensor& q)>;
  Attn load_attn(const WeightSource& src, const std::string& p, bool decoder_side) const;
  Weight decoder_matrix(const WeightSource& src, const std::string& name) const;
  // The encoder's self-attention on the CPU as matrix products; [t, d] before the output projection.
  Tensor encoder_attention_cpu(const Attn& a, const Tensor& hn) const;
  Tensor mlp(const Tensor& x, const Weight& fc1, const Tensor& b1, const Weight& fc2, const Tensor& b2) const;
  // Embedding + positions for `tokens` at positions `pos`.
  Tensor embed(const std::vector<int32_t>& tokens, const std::vector<int64_t>& pos) const;
  // Cross-attention, MLP and residuals of layer `li` after its self-attention output `a`.
  Tensor layer_tail(size_t li, const Tensor& x, const Tensor& a, const CrossKV& cross, const CrossQueryTap* tap) const;
  // The logits of `rows` of `tokens` (all of them when null).
  Tensor forward(DecoderState& st, const std::vector<int32_t>& tokens, const std::vector<int64_t>* rows,
                 const CrossQueryTap* tap) const;
  Tensor logits(const Tensor& x) const;

  ModelConfig cfg_;
  WhisperConfig wc_;
  Device device_;
  WhisperPrecision precision_;
  Weight conv1_, conv2_;
  Tensor conv1_b_, conv2_b_;
  Tensor enc_pos_, enc_ln_w_, enc_ln_b_;
  std::vector<EncLayer> enc_;
  Weight embed_;
  Tensor dec_pos_, dec_ln_w_, dec_ln_b_;
  std::vector<DecLayer> dec_;
  Weight proj_out_;
};

}  // namespace ingot
