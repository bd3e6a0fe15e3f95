#include "models/whisper.h"

#include <cmath>

#include "kv/contiguous.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ingot {

namespace {

constexpr float kLnEps = 1e-5f;

// Conv1d with kernel 3 and padding 1 as im2col + linear. x is [C, T]
// (channels first, as the mel arrives); returns [T_out, out_channels].
Tensor conv1d_k3(const Tensor& x_ct, const Weight& w, const Tensor& b, int stride) {
  Tensor x = x_ct.to(Device::CPU).contiguous();
  INGOT_CHECK(x.dtype() == DType::F32);
  const int64_t c = x.dim(0), t = x.dim(1), tout = (t + 2 - 3) / stride + 1;
  std::vector<float> col(static_cast<size_t>(tout * c * 3), 0.0f);
  const float* px = x.data<float>();
  for (int64_t o = 0; o < tout; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int j = 0; j < 3; ++j) {
        int64_t src = o * stride + j - 1;
        if (src >= 0 && src < t) col[static_cast<size_t>((o * c + ch) * 3 + j)] = px[ch * t + src];
      }
  Tensor cols = Tensor::from_f32(col, {tout, c * 3}).to(w.device());
  return ops::linear(cols, w, &b);
}

}  // namespace

std::unique_ptr<WhisperModel> WhisperModel::load(const std::string& dir, const LoadOptions& opt) {
  ModelConfig cfg = load_model_config(dir);
  if (cfg.model_type != "whisper") fail(ErrorKind::InvalidArgument, dir, " is a ", cfg.model_type, " model, not whisper");
  auto src = open_safetensors_source(dir, cfg, opt);
  return std::make_unique<WhisperModel>(cfg, *src, opt);
}

WhisperModel::Attn WhisperModel::load_attn(const WeightSource& src, const std::string& p) const {
  Attn a;
  a.q = src.matrix(p + "q_proj.weight");
  a.k = src.matrix(p + "k_proj.weight");
  a.v = src.matrix(p + "v_proj.weight");
  a.o = src.matrix(p + "out_proj.weight");
  a.qb = src.vector(p + "q_proj.bias");
  a.vb = src.vector(p + "v_proj.bias");
  a.ob = src.vector(p + "out_proj.bias");
  return a;
}

WhisperModel::WhisperModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt)
    : cfg_(cfg), device_(opt.device) {
  wc_.d_model = cfg.get_int("d_model", 0);
  wc_.vocab_size = cfg.vocab_size;
  wc_.num_mel_bins = cfg.get_int("num_mel_bins", 80);
  wc_.encoder_layers = cfg.get_int("encoder_layers", 0);
  wc_.decoder_layers = cfg.get_int("decoder_layers", 0);
  wc_.encoder_heads = cfg.get_int("encoder_attention_heads", 0);
  wc_.decoder_heads = cfg.get_int("decoder_attention_heads", 0);
  wc_.max_source_positions = cfg.get_int("max_source_positions", 1500);
  wc_.max_target_positions = cfg.get_int("max_target_positions", 448);
  wc_.scale_embedding = cfg.get_bool("scale_embedding", false);
  wc_.activation = cfg.get_string("activation_function", "gelu");
  if (wc_.d_model <= 0 || wc_.encoder_heads <= 0 || wc_.decoder_heads <= 0 || wc_.vocab_size <= 0 ||
      wc_.d_model % wc_.encoder_heads || wc_.d_model % wc_.decoder_heads)
    fail(ErrorKind::BadFormat, "whisper config: bad d_model / heads / vocab_size");
  if (wc_.activation != "gelu") fail(ErrorKind::Unsupported, "whisper: activation '", wc_.activation, "'");
  auto conv = [&](const std::string& name, int64_t in) {
    Tensor w = src.raw(name).to(DType::F32).contiguous();
    if (w.ndim() != 3 || w.dim(1) != in || w.dim(2) != 3) fail(ErrorKind::BadFormat, name, ": unexpected shape ", w.describe());
    Weight out;
    out.data = w.reshape({w.dim(0), in * 3}).to(device_);
    return out;
  };
  conv1_ = conv("model.encoder.conv1.weight", wc_.num_mel_bins);
  conv2_ = conv("model.encoder.conv2.weight", wc_.d_model);
  conv1_b_ = src.vector("model.encoder.conv1.bias");
  conv2_b_ = src.vector("model.encoder.conv2.bias");
  enc_pos_ = src.vector("model.encoder.embed_positions.weight");
  enc_ln_w_ = src.vector("model.encoder.layer_norm.weight");
  enc_ln_b_ = src.vector("model.encoder.layer_norm.bias");
  for (int64_t i = 0; i < wc_.encoder_layers; ++i) {
    std::string p = "model.encoder.layers." + std::to_string(i) + ".";
    EncLayer L;
    L.ln1_w = src.vector(p + "self_attn_layer_norm.weight");
    L.ln1_b = src.vector(p + "self_attn_layer_norm.bias");
    L.ln2_w = src.vector(p + "final_layer_norm.weight");
    L.ln2_b = src.vector(p + "final_layer_norm.bias");
    L.attn = load_attn(src, p + "self_attn.");
    L.fc1 = src.matrix(p + "fc1.weight");
    L.fc2 = src.matrix(p + "fc2.weight");
    L.fc1_b = src.vector(p + "fc1.bias");
    L.fc2_b = src.vector(p + "fc2.bias");
    enc_.push_back(std::move(L));
  }
  embed_ = src.matrix("model.decoder.embed_tokens.weight");
  dec_pos_ = src.vector("model.decoder.embed_positions.weight");
  dec_ln_w_ = src.vector("model.decoder.layer_norm.weight");
  dec_ln_b_ = src.vector("model.decoder.layer_norm.bias");
  for (int64_t i = 0; i < wc_.decoder_layers; ++i) {
    std::string p = "model.decoder.layers." + std::to_string(i) + ".";
    DecLayer L;
    L.ln1_w = src.vector(p + "self_attn_layer_norm.weight");
    L.ln1_b = src.vector(p + "self_attn_layer_norm.bias");
    L.lnx_w = src.vector(p + "encoder_attn_layer_norm.weight");
    L.lnx_b = src.vector(p + "encoder_attn_layer_norm.bias");
    L.ln2_w = src.vector(p + "final_layer_norm.weight");
    L.ln2_b = src.vector(p + "final_layer_norm.bias");
    L.self_attn = load_attn(src, p + "self_attn.");
    L.cross_attn = load_attn(src, p + "encoder_attn.");
    L.fc1 = src.matrix(p + "fc1.weight");
    L.fc2 = src.matrix(p + "fc2.weight");
    L.fc1_b = src.vector(p + "fc1.bias");
    L.fc2_b = src.vector(p + "fc2.bias");
    dec_.push_back(std::move(L));
  }
  proj_out_ = src.has("proj_out.weight") && !cfg.tie_word_embeddings ? src.matrix("proj_out.weight") : embed_;
}

Tensor WhisperModel::mlp(const Tensor& x, const Weight& fc1, const Tensor& b1, const Weight& fc2,
                         const Tensor& b2) const {
  return ops::linear(ops::gelu(ops::linear(x, fc1, &b1)), fc2, &b2);
}

Tensor WhisperModel::encode(const Tensor& mel) const {
  const int64_t d = wc_.d_model, h = wc_.encoder_heads, hd = d / h;
  if (mel.ndim() != 2 || mel.dim(0) != wc_.num_mel_bins || mel.dim(1) != 2 * wc_.max_source_positions)
    fail(ErrorKind::InvalidArgument, "whisper: mel must be [", wc_.num_mel_bins, ", ", 2 * wc_.max_source_positions,
         "], got ", mel.describe());
  Tensor x = ops::gelu(conv1d_k3(mel, conv1_, conv1_b_, 1));        // [3000, d]
  x = ops::gelu(conv1d_k3(x.to(Device::CPU).transpose(0, 1), conv2_, conv2_b_, 2));  // [1500, d]
  x = ops::add(x, enc_pos_.slice(0, 0, x.dim(0)).contiguous());
  const int64_t t = x.dim(0);
  AttnParams ap;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ap.causal = false;
  for (const EncLayer& L : enc_) {
    Tensor hn = ops::layer_norm(x, L.ln1_w, L.ln1_b, kLnEps);
    Tensor q = ops::linear(hn, L.attn.q, &L.attn.qb).reshape({t, h, hd});
    Tensor k = ops::linear(hn, L.attn.k).reshape({t, h, hd});
    Tensor v = ops::linear(hn, L.attn.v, &L.attn.vb).reshape({t, h, hd});
    Tensor a = ops::attention(q, k, v, ap).reshape({t, d});
    x = ops::add(x, ops::linear(a, L.attn.o, &L.attn.ob));
    x = ops::add(x, mlp(ops::layer_norm(x, L.ln2_w, L.ln2_b, kLnEps), L.fc1, L.fc1_b, L.fc2, L.fc2_b));
  }
  return ops::layer_norm(x, enc_ln_w_, enc_ln_b_, kLnEps);
}

WhisperModel::DecoderState WhisperModel::start(const Tensor& enc) const {
  const int64_t d = wc_.d_model, h = wc_.decoder_heads, hd = d / h, s = enc.dim(0);
  DecoderState st;
  kv::LayerSpec spec{h, hd, hd, 0};
  st.self = kv::make_contiguous_cache(std::vector<kv::LayerSpec>(dec_.size(), spec), DType::F32, device_);
  for (const DecLayer& L : dec_) {
    st.cross_k.push_back(ops::linear(enc, L.cross_attn.k).reshape({s, h, hd}));
    st.cross_v.push_back(ops::linear(enc, L.cross_attn.v, &L.cross_attn.vb).reshape({s, h, hd}));
  }
  return st;
}

Tensor WhisperModel::decode(DecoderState& st, const std::vector<int32_t>& tokens, bool all_logits) const {
  const int64_t d = wc_.d_model, h = wc_.decoder_heads, hd = d / h, n = static_cast<int64_t>(tokens.size());
  const int64_t past = st.length();
  INGOT_CHECK(n > 0);
  if (past + n > wc_.max_target_positions)
    fail(ErrorKind::InvalidArgument, "whisper: decoder length ", past + n, " exceeds max_target_positions ",
         wc_.max_target_positions);
  for (int32_t t : tokens)
    if (t < 0 || t >= wc_.vocab_size) fail(ErrorKind::InvalidArgument, "whisper: token id ", t, " out of range");
  Tensor ids = Tensor::from_i32(tokens, {n}).to(device_);
  Tensor x = ops::embedding(embed_, ids);
  if (wc_.scale_embedding) x = ops::scale(x, std::sqrt(static_cast<float>(d)));
  x = ops::add(x, dec_pos_.slice(0, past, past + n).contiguous());
  AttnParams self_p;
  self_p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  AttnParams cross_p = self_p;
  cross_p.causal = false;
  for (size_t li = 0; li < dec_.size(); ++li) {
    const DecLayer& L = dec_[li];
    Tensor hn = ops::layer_norm(x, L.ln1_w, L.ln1_b, kLnEps);
    Tensor q = ops::linear(hn, L.self_attn.q, &L.self_attn.qb).reshape({n, h, hd});
    Tensor k = ops::linear(hn, L.self_attn.k).reshape({n, h, hd});
    Tensor v = ops::linear(hn, L.self_attn.v, &L.self_attn.vb).reshape({n, h, hd});
    auto& lc = st.self->layer(static_cast<int>(li));
    lc.append(k, v);
    Tensor a = lc.attend(q, self_p).reshape({n, d});
    x = ops::add(x, ops::linear(a, L.self_attn.o, &L.self_attn.ob));
    hn = ops::layer_norm(x, L.lnx_w, L.lnx_b, kLnEps);
    Tensor cq = ops::linear(hn, L.cross_attn.q, &L.cross_attn.qb).reshape({n, h, hd});
    Tensor c = ops::attention(cq, st.cross_k[li], st.cross_v[li], cross_p).reshape({n, d});
    x = ops::add(x, ops::linear(c, L.cross_attn.o, &L.cross_attn.ob));
    x = ops::add(x, mlp(ops::layer_norm(x, L.ln2_w, L.ln2_b, kLnEps), L.fc1, L.fc1_b, L.fc2, L.fc2_b));
  }
  if (!all_logits && n > 1) x = x.slice(0, n - 1, n).contiguous();
  x = ops::layer_norm(x, dec_ln_w_, dec_ln_b_, kLnEps);
  return ops::linear(x, proj_out_);
}

}  // namespace ingot
