#include "models/whisper.h"

#include <cmath>
#include <cstring>
#include <functional>

#include "kv/batched_rows.h"
#include "kv/contiguous.h"
#include "ops/ops.h"
#include "quant/q8_0_writer.h"
#include "util/error.h"

namespace ingot {

namespace {

constexpr float kLnEps = 1e-5f;

// Conv1d with kernel 3 and padding 1 as im2col + linear. x is [T, C] (time
// major); w was reordered at load to [out, 3 * C] with the taps outermost,
// so each im2col row is three contiguous input rows. Returns [T_out, out].
Tensor conv1d_k3(const Tensor& x_tc, const Weight& w, const Tensor& b, int stride) {
  Tensor x = x_tc.to(Device::CPU).contiguous();
  INGOT_CHECK(x.dtype() == DType::F32);
  const int64_t t = x.dim(0), c = x.dim(1), tout = (t + 2 - 3) / stride + 1;
  Tensor cols = Tensor::zeros({tout, 3 * c}, DType::F32);
  const float* px = x.data<float>();
  float* pc = cols.data<float>();
  for (int64_t o = 0; o < tout; ++o)
    for (int j = 0; j < 3; ++j) {
      const int64_t src = o * stride + j - 1;
      if (src >= 0 && src < t)
        std::memcpy(pc + (o * 3 + j) * c, px + src * c, static_cast<size_t>(c) * sizeof(float));
    }
  return ops::linear_bulk(cols.to(w.device()), w, &b);
}

}  // namespace

WhisperPrecision parse_whisper_precision(const std::string& s) {
  if (s == "float32" || s == "float") return WhisperPrecision::Float;
  if (s == "int8") return WhisperPrecision::Int8;
  fail(ErrorKind::InvalidArgument, "Whisper weights must be float32 or int8, got '", s, "'");
}

std::unique_ptr<WhisperModel> WhisperModel::load(const std::string& dir, const LoadOptions& opt,
                                                 WhisperPrecision precision) {
  ModelConfig cfg = load_model_config(dir);
  if (cfg.model_type != "whisper") fail(ErrorKind::InvalidArgument, dir, " is a ", cfg.model_type, " model, not whisper");
  auto src = open_safetensors_source(dir, cfg, opt);
  return std::make_unique<WhisperModel>(cfg, *src, opt, precision);
}

Weight WhisperModel::decoder_matrix(const WeightSource& src, const std::string& name) const {
  Weight w = src.matrix(name);
  if (precision_ != WhisperPrecision::Int8 || w.is_affine() || is_quantized(w.dtype())) return w;
  if (w.cols() % 32 != 0) return w;  // Q8_0 blocks are 32 wide; odd widths stay float
  Weight q = quant::quantize_q8_0(w.data);
  q.data = q.data.to(device_);
  return q;
}

WhisperModel::Attn WhisperModel::load_attn(const WeightSource& src, const std::string& p, bool decoder_side) const {
  auto m = [&](const std::string& n) { return decoder_side ? decoder_matrix(src, p + n) : src.matrix(p + n); };
  Attn a;
  a.q = m("q_proj.weight");
  a.k = m("k_proj.weight");
  a.v = m("v_proj.weight");
  a.o = m("out_proj.weight");
  a.qb = src.vector(p + "q_proj.bias");
  a.vb = src.vector(p + "v_proj.bias");
  a.ob = src.vector(p + "out_proj.bias");
  return a;
}

WhisperModel::WhisperModel(const ModelConfig& cfg, const WeightSource& src, const LoadOptions& opt,
                           WhisperPrecision precision)
    : cfg_(cfg), device_(opt.device), precision_(precision) {
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
  // [out, in, 3] -> [out, 3 * in] with the tap outermost (conv1d_k3's im2col order).
  auto conv = [&](const std::string& name, int64_t in) {
    Tensor w = src.raw(name).to(DType::F32).contiguous();
    if (w.ndim() != 3 || w.dim(1) != in || w.dim(2) != 3) fail(ErrorKind::BadFormat, name, ": unexpected shape ", w.describe());
    Weight out;
    out.data = w.transpose(1, 2).contiguous().reshape({w.dim(0), 3 * in}).to(device_);
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
    L.attn = load_attn(src, p + "self_attn.", false);
    // The CPU encoder leaves V's bias out of V and adds its image through
    // the output projection (encoder_attention_cpu): b_o + W_o b_v.
    if (device_ == Device::CPU)
      L.enc_ob = ops::linear(L.attn.vb.reshape({1, wc_.d_model}), L.attn.o, &L.attn.ob).reshape({wc_.d_model});
    L.fc1 = src.matrix(p + "fc1.weight");
    L.fc2 = src.matrix(p + "fc2.weight");
    L.fc1_b = src.vector(p + "fc1.bias");
    L.fc2_b = src.vector(p + "fc2.bias");
    enc_.push_back(std::move(L));
  }
  embed_ = decoder_matrix(src, "model.decoder.embed_tokens.weight");
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
    L.self_attn = load_attn(src, p + "self_attn.", true);
    L.cross_attn = load_attn(src, p + "encoder_attn.", true);
    // The cross K/V projections read 1500 encoder rows once per window (see WhisperPrecision).
    L.cross_attn.k = src.matrix(p + "encoder_attn.k_proj.weight");
    L.cross_attn.v = src.matrix(p + "encoder_attn.v_proj.weight");
    L.fc1 = decoder_matrix(src, p + "fc1.weight");
    L.fc2 = decoder_matrix(src, p + "fc2.weight");
    L.fc1_b = src.vector(p + "fc1.bias");
    L.fc2_b = src.vector(p + "fc2.bias");
    dec_.push_back(std::move(L));
  }
  proj_out_ = src.has("proj_out.weight") && !cfg.tie_word_embeddings ? decoder_matrix(src, "proj_out.weight") : embed_;
}

Tensor WhisperModel::mlp(const Tensor& x, const Weight& fc1, const Tensor& b1, const Weight& fc2,
                         const Tensor& b2) const {
  return ops::linear(ops::gelu(ops::linear(x, fc1, &b1)), fc2, &b2);
}

namespace {

// Rows [r0, r1) of a dense weight, as a weight.
Weight weight_rows(const Weight& w, int64_t r0, int64_t r1) {
  Weight out;
  out.data = w.data.slice(0, r0, r1);
  return out;
}

Weight as_weight(const Tensor& t) {
  Weight out;
  out.data = t;
  return out;
}

}  // namespace

// The encoder's 1500 x 1500 non-causal attention as three matrix products per
// head: scores S = (Q_h / sqrt(hd)) K_h^T, P = softmax(S), O_h^T = V_h^T P^T.
// With every query seeing every key the whole score matrix is one product at
// the dense linear's rate; the tiled attention kernel computes one dot per
// (query, key), several times slower on the CPU. V_h^T comes out directly as
// W_v,h hn^T; V's bias is in enc_ob, since softmax rows sum to one.
// Returns the heads' outputs [t, d] before the output projection.
Tensor WhisperModel::encoder_attention_cpu(const Attn& a, const Tensor& hn) const {
  const int64_t d = wc_.d_model, h = wc_.encoder_heads, hd = d / h;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const Weight hn_rows = as_weight(hn);
  std::vector<Tensor> heads;  // O_h^T [hd, t] each
  for (int64_t i = 0; i < h; ++i) {
    const int64_t r0 = i * hd, r1 = r0 + hd;
    const Tensor qb = a.qb.slice(0, r0, r1).contiguous();
    const Tensor q = ops::scale(ops::linear_bulk(hn, weight_rows(a.q, r0, r1), &qb), scale);
    const Tensor k = ops::linear_bulk(hn, weight_rows(a.k, r0, r1));
    const Tensor p = ops::softmax(ops::linear_bulk(q, as_weight(k)));     // [t queries, t keys]
    const Tensor vt = ops::linear_bulk(a.v.data.slice(0, r0, r1), hn_rows);  // [hd, t keys]
    heads.push_back(ops::linear_bulk(vt, as_weight(p)));                  // [hd, t queries]
  }
  return ops::concat_rows(heads).transpose(0, 1).contiguous();
}

Tensor WhisperModel::encode(const Tensor& mel) const {
  const int64_t d = wc_.d_model, h = wc_.encoder_heads, hd = d / h;
  if (mel.ndim() != 2 || mel.dim(0) != wc_.num_mel_bins || mel.dim(1) != 2 * wc_.max_source_positions)
    fail(ErrorKind::InvalidArgument, "whisper: mel must be [", wc_.num_mel_bins, ", ", 2 * wc_.max_source_positions,
         "], got ", mel.describe());
  Tensor x = ops::gelu(conv1d_k3(mel.to(Device::CPU).transpose(0, 1), conv1_, conv1_b_, 1));  // [3000, d]
  x = ops::gelu(conv1d_k3(x, conv2_, conv2_b_, 2));                                           // [1500, d]
  x = ops::add(x, enc_pos_.slice(0, 0, x.dim(0)).contiguous());
  const int64_t t = x.dim(0);
  AttnParams ap;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ap.causal = false;
  for (const EncLayer& L : enc_) {
    Tensor hn = ops::layer_norm(x, L.ln1_w, L.ln1_b, kLnEps);
    if (device_ == Device::CPU) {
      x = ops::add(x, ops::linear_bulk(encoder_attention_cpu(L.attn, hn), L.attn.o, &L.enc_ob));
    } else {
      Tensor q = ops::linear_bulk(hn, L.attn.q, &L.attn.qb).reshape({t, h, hd});
      Tensor k = ops::linear_bulk(hn, L.attn.k).reshape({t, h, hd});
      Tensor v = ops::linear_bulk(hn, L.attn.v, &L.attn.vb).reshape({t, h, hd});
      Tensor a = ops::attention(q, k, v, ap).reshape({t, d});
      x = ops::add(x, ops::linear_bulk(a, L.attn.o, &L.attn.ob));
    }
    Tensor hn2 = ops::layer_norm(x, L.ln2_w, L.ln2_b, kLnEps);
    x = ops::add(x, ops::linear_bulk(ops::gelu(ops::linear_bulk(hn2, L.fc1, &L.fc1_b)), L.fc2, &L.fc2_b));
  }
  return ops::layer_norm(x, enc_ln_w_, enc_ln_b_, kLnEps);
}

std::shared_ptr<const WhisperModel::CrossKV> WhisperModel::cross_kv(const Tensor& enc) const {
  const int64_t h = wc_.decoder_heads, hd = wc_.d_model / h, s = enc.dim(0);
  auto c = std::make_shared<CrossKV>();
  for (const DecLayer& L : dec_) {
    c->k.push_back(ops::linear_bulk(enc, L.cross_attn.k).reshape({s, h, hd}));
    c->v.push_back(ops::linear_bulk(enc, L.cross_attn.v, &L.cross_attn.vb).reshape({s, h, hd}));
  }
  return c;
}

WhisperModel::DecoderState WhisperModel::start(std::shared_ptr<const CrossKV> cross) const {
  INGOT_CHECK(cross && cross->k.size() == dec_.size(), "whisper: cross K/V of another model");
  const int64_t h = wc_.decoder_heads, hd = wc_.d_model / h;
  DecoderState st;
  kv::LayerSpec spec{h, hd, hd, 0};
  st.self = kv::make_contiguous_cache(std::vector<kv::LayerSpec>(dec_.size(), spec), DType::F32, device_);
  st.cross = std::move(cross);
  return st;
}

Tensor WhisperModel::embed(const std::vector<int32_t>& tokens, const std::vector<int64_t>& pos) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int32_t t : tokens)
    if (t < 0 || t >= wc_.vocab_size) fail(ErrorKind::InvalidArgument, "whisper: token id ", t, " out of range");
  for (int64_t p : pos)
    if (p >= wc_.max_target_positions)
      fail(ErrorKind::InvalidArgument, "whisper: decoder length ", p + 1, " exceeds max_target_positions ",
           wc_.max_target_positions);
  Tensor x = ops::embedding(embed_, Tensor::from_i32(tokens, {n}).to(device_));
  if (wc_.scale_embedding) x = ops::scale(x, std::sqrt(static_cast<float>(wc_.d_model)));
  // Consecutive positions (one sequence) are one slice; a batch gathers its rows.
  bool consecutive = true;
  for (size_t i = 1; i < pos.size(); ++i) consecutive &= pos[i] == pos[i - 1] + 1;
  Tensor p = consecutive ? dec_pos_.slice(0, pos[0], pos[0] + n).contiguous() : ops::gather_rows(dec_pos_, pos);
  return ops::add(x, p);
}

Tensor WhisperModel::layer_tail(size_t li, const Tensor& x_in, const Tensor& a, const CrossKV& cross,
                                const CrossQueryTap* tap) const {
  const int64_t d = wc_.d_model, h = wc_.decoder_heads, hd = d / h, n = x_in.dim(0);
  const DecLayer& L = dec_[li];
  AttnParams cross_p;
  cross_p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cross_p.causal = false;  // every row sees the whole window, so rows of different sequences may share a call
  Tensor x = ops::add(x_in, ops::linear(a, L.self_attn.o, &L.self_attn.ob));
  Tensor hn = ops::layer_norm(x, L.lnx_w, L.lnx_b, kLnEps);
  Tensor cq = ops::linear(hn, L.cross_attn.q, &L.cross_attn.qb).reshape({n, h, hd});
  if (tap) (*tap)(static_cast<int>(li), cq);
  Tensor c = ops::attention(cq, cross.k[li], cross.v[li], cross_p).reshape({n, d});
  x = ops::add(x, ops::linear(c, L.cross_attn.o, &L.cross_attn.ob));
  return ops::add(x, mlp(ops::layer_norm(x, L.ln2_w, L.ln2_b, kLnEps), L.fc1, L.fc1_b, L.fc2, L.fc2_b));
}

Tensor WhisperModel::logits(const Tensor& x) const {
  return ops::linear(ops::layer_norm(x, dec_ln_w_, dec_ln_b_, kLnEps), proj_out_);
}

Tensor WhisperModel::forward(DecoderState& st, const std::vector<int32_t>& tokens, const std::vector<int64_t>* rows,
                             const CrossQueryTap* tap) const {
  const int64_t d = wc_.d_model, h = wc_.decoder_heads, hd = d / h, n = static_cast<int64_t>(tokens.size());
  INGOT_CHECK(n > 0 && st.self && st.cross);
  std::vector<int64_t> pos(tokens.size());
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = st.length() + i;
  Tensor x = embed(tokens, pos);
  AttnParams self_p;
  self_p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t li = 0; li < dec_.size(); ++li) {
    const DecLayer& L = dec_[li];
    Tensor hn = ops::layer_norm(x, L.ln1_w, L.ln1_b, kLnEps);
    Tensor q = ops::linear(hn, L.self_attn.q, &L.self_attn.qb).reshape({n, h, hd});
    Tensor k = ops::linear(hn, L.self_attn.k).reshape({n, h, hd});
    Tensor v = ops::linear(hn, L.self_attn.v, &L.self_attn.vb).reshape({n, h, hd});
    auto& lc = st.self->layer(static_cast<int>(li));
    lc.append(k, v);
    x = layer_tail(li, x, lc.attend(q, self_p).reshape({n, d}), *st.cross, tap);
  }
  if (rows) {
    for (int64_t r : *rows) INGOT_CHECK(r >= 0 && r < n, "whisper: logits row ", r, " of ", n, " tokens");
    bool all = static_cast<int64_t>(rows->size()) == n;
    for (size_t i = 0; all && i < rows->size(); ++i) all = (*rows)[i] == static_cast<int64_t>(i);
    if (!all) x = ops::gather_rows(x, *rows);
  }
  return logits(x);
}

Tensor WhisperModel::decode(DecoderState& st, const std::vector<int32_t>& tokens, bool all_logits) const {
  std::vector<int64_t> last{static_cast<int64_t>(tokens.size()) - 1};
  return forward(st, tokens, all_logits ? nullptr : &last, nullptr);
}

Tensor WhisperModel::decode_rows(DecoderState& st, const std::vector<int32_t>& tokens,
                                 const std::vector<int64_t>& rows) const {
  return forward(st, tokens, &rows, nullptr);
}

Tensor WhisperModel::decode_step(const std::vector<DecoderState*>& states, const std::vector<int32_t>& tokens) const {
  const int64_t d = wc_.d_model, h = wc_.decoder_heads, hd = d / h, n = static_cast<int64_t>(states.size());
  INGOT_CHECK(n > 0 && tokens.size() == states.size(), "whisper: one token per sequence");
  const CrossKV& cross = *states[0]->cross;
  std::vector<int64_t> pos;
  for (DecoderState* s : states) {
    INGOT_CHECK(s->self && s->cross.get() == &cross, "whisper: a batched step needs one window's sequences");
    pos.push_back(s->length());
  }
  if (n == 1) return decode(*states[0], tokens);
  Tensor x = embed(tokens, pos);
  AttnParams self_p;
  self_p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<int32_t> pos32(pos.begin(), pos.end());
  Tensor positions = Tensor::from_i32(pos32, {n}).to(device_);
  for (size_t li = 0; li < dec_.size(); ++li) {
    const DecLayer& L = dec_[li];
    Tensor hn = ops::layer_norm(x, L.ln1_w, L.ln1_b, kLnEps);
    Tensor q = ops::linear(hn, L.self_attn.q, &L.self_attn.qb).reshape({n, h, hd});
    Tensor k = ops::linear(hn, L.self_attn.k).reshape({n, h, hd});
    Tensor v = ops::linear(hn, L.self_attn.v, &L.self_attn.vb).reshape({n, h, hd});
    std::vector<kv::LayerCache*> layers;
    for (DecoderState* s : states) layers.push_back(&s->self->layer(static_cast<int>(li)));
    // One launch for every sequence where the device has the batched kernel; else one sequence at a time.
    Tensor a = kv::append_attend_rows(layers, q, k, v, positions, nullptr, self_p);
    if (!a.defined()) {
      std::vector<Tensor> rows;
      for (int64_t i = 0; i < n; ++i) {
        layers[static_cast<size_t>(i)]->append(k.slice(0, i, i + 1), v.slice(0, i, i + 1));
        rows.push_back(layers[static_cast<size_t>(i)]->attend(q.slice(0, i, i + 1).contiguous(), self_p));
      }
      a = ops::concat_rows(rows);
    }
    x = layer_tail(li, x, a.reshape({n, d}), cross, nullptr);
  }
  return logits(x);
}

std::vector<Tensor> WhisperModel::cross_attention_weights(std::shared_ptr<const CrossKV> cross,
                                                          const std::vector<int32_t>& tokens,
                                                          const std::vector<std::pair<int, int>>& heads) const {
  const int64_t h = wc_.decoder_heads, hd = wc_.d_model / h;
  for (const auto& [layer, head] : heads)
    if (layer < 0 || layer >= static_cast<int>(dec_.size()) || head < 0 || head >= h)
      fail(ErrorKind::InvalidArgument, "whisper: alignment head (", layer, ", ", head, ") is not in the model");
  std::vector<Tensor> out(heads.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  CrossQueryTap tap = [&](int layer, const Tensor& q) {
    for (size_t i = 0; i < heads.size(); ++i) {
      if (heads[i].first != layer) continue;
      const int64_t head = heads[i].second;
      Tensor qh = q.slice(1, head, head + 1).contiguous().reshape({q.dim(0), hd});
      Weight kh;
      kh.data = cross->k[static_cast<size_t>(layer)].slice(1, head, head + 1).contiguous().reshape(
          {cross->k[static_cast<size_t>(layer)].dim(0), hd});
      out[i] = ops::scale(ops::linear(qh, kh), scale).to(Device::CPU);
    }
  };
  DecoderState st = start(cross);  // `cross` stays for the tap
  std::vector<int64_t> last{static_cast<int64_t>(tokens.size()) - 1};
  forward(st, tokens, &last, &tap);
  return out;
}

}  // namespace ingot
