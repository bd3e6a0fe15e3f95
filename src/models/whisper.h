// Whisper (encoder-decoder speech model): conv stem + transformer encoder,
// decoder with causal self-attention (KV cache) and cross-attention whose
// K/V are computed once per audio window.
#pragma once
#include <memory>
#include <string>
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

class WhisperModel {
 public:
  static std::unique_ptr<WhisperModel> load(const std::string& dir, const LoadOptions& opt = {});
  WhisperModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt);

  const WhisperConfig& config() const { return wc_; }
  const ModelConfig& model_config() const { return cfg_; }
  Device device() const { return device_; }

  // mel [n_mels, 2 * max_source_positions] -> encoder states [max_source_positions, d].
  Tensor encode(const Tensor& mel) const;

  // One audio window's decoder state: self-attention caches and the
  // cross-attention K/V of each layer.
  struct DecoderState {
    std::unique_ptr<kv::SequenceCache> self;
    std::vector<Tensor> cross_k, cross_v;
    int64_t length() const { return self ? self->offset() : 0; }
  };
  DecoderState start(const Tensor& encoder_out) const;
  // Feeds `tokens`; returns logits [tokens, vocab] (all rows) or [1, vocab].
  Tensor decode(DecoderState& st, const std::vector<int32_t>& tokens, bool all_logits = false) const;

 private:
  struct Attn {
    Weight q, k, v, o;
    Tensor qb, vb, ob;
  };
  struct EncLayer {
    Tensor ln1_w, ln1_b, ln2_w, ln2_b;
    Attn attn;
    Weight fc1, fc2;
    Tensor fc1_b, fc2_b;
  };
  struct DecLayer {
    Tensor ln1_w, ln1_b, lnx_w, lnx_b, ln2_w, ln2_b;
    Attn self_attn, cross_attn;
    Weight fc1, fc2;
    Tensor fc1_b, fc2_b;
  };
  Attn load_attn(const WeightSource& src, const std::string& p) const;
  Tensor mlp(const Tensor& x, const Weight& fc1, const Tensor& b1, const Weight& fc2, const Tensor& b2) const;

  ModelConfig cfg_;
  WhisperConfig wc_;
  Device device_;
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
