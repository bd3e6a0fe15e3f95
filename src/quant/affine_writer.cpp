#include "quant/affine_writer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "util/error.h"

namespace ingot::quant {

namespace fs = std::filesystem;

AffineTensors quantize_affine(const Tensor& w_in, int bits, int group) {
  if (bits != 4 && bits != 8) fail(ErrorKind::InvalidArgument, "--bits must be 4 or 8, got ", bits);
  if (group != 32 && group != 64 && group != 128)
    fail(ErrorKind::InvalidArgument, "--group-size must be 32, 64 or 128, got ", group);
  if (w_in.ndim() != 2) fail(ErrorKind::InvalidArgument, "affine quantization needs a matrix, got ", w_in.describe());
  const int64_t rows = w_in.dim(0), cols = w_in.dim(1);
  if (cols % group != 0) fail(ErrorKind::InvalidArgument, "matrix width ", cols, " is not a multiple of group size ", group);
  std::vector<float> w = w_in.contiguous().to(DType::F32).to_f32_vector();
  const int64_t groups = cols / group, per_word = 32 / bits;
  const float levels = static_cast<float>((1 << bits) - 1);
  AffineTensors out;
  out.weight = Tensor::zeros({rows, cols / per_word}, DType::U32);
  std::vector<float> sc(static_cast<size_t>(rows * groups)), bi(sc.size());
  auto* words = out.weight.data<uint32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* v = w.data() + r * cols + g * group;
      float lo = v[0], hi = v[0];
      for (int i = 1; i < group; ++i) lo = std::fmin(lo, v[i]), hi = std::fmax(hi, v[i]);
      float scale = (hi - lo) / levels;
      if (!(scale > 0)) scale = 1.0f;  // constant group: every value is the bias
      sc[static_cast<size_t>(r * groups + g)] = scale;
      bi[static_cast<size_t>(r * groups + g)] = lo;
      for (int i = 0; i < group; ++i) {
        float q = std::nearbyint((v[i] - lo) / scale);
        q = std::fmin(std::fmax(q, 0.0f), levels);
        const int64_t e = g * group + i;
        words[r * (cols / per_word) + e / per_word] |= static_cast<uint32_t>(q) << (bits * (e % per_word));
      }
    }
  }
  out.scales = Tensor::from_f32(sc, {rows, groups});
  out.biases = Tensor::from_f32(bi, {rows, groups});
  return out;
}

QuantizeReport quantize_checkpoint(const std::string& src, const std::string& dst, int bits, int group) {
  if (!fs::is_directory(src)) fail(ErrorKind::NotFound, "not a checkpoint directory: ", src);
  const fs::path cfg_path = fs::path(src) / "config.json";
  std::ifstream cf(cfg_path);
  if (!cf) fail(ErrorKind::NotFound, "no config.json in ", src);
  std::stringstream ss;
  ss << cf.rdbuf();
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, cfg_path.string(), ": ", e.what());
  }
  if (cfg.contains("quantization")) fail(ErrorKind::InvalidArgument, src, " is already quantized");
  quantize_affine(Tensor::zeros({1, group}, DType::F32), bits, group);  // validates bits / group up front

  auto store = WeightStore::open_dir(src);
  QuantizeReport rep;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& name : store->names()) {
    Tensor t = store->get(name);
    rep.bytes_in += t.nbytes();
    const bool matrix = t.ndim() == 2 && dtype_info(t.dtype()).is_float && name.ends_with(".weight") &&
                        t.dim(1) % group == 0 && t.dim(0) > 1;
    if (!matrix) {
      out.emplace_back(name, t);
      rep.bytes_out += t.nbytes();
      ++rep.kept;
      continue;
    }
    AffineTensors a = quantize_affine(t, bits, group);
    const std::string base = name.substr(0, name.size() - 7);
    rep.bytes_out += a.weight.nbytes() + a.scales.nbytes() + a.biases.nbytes();
    out.emplace_back(name, a.weight);
    out.emplace_back(base + ".scales", a.scales);
    out.emplace_back(base + ".biases", a.biases);
    ++rep.quantized;
  }
  fs::create_directories(dst);
  write_safetensors((fs::path(dst) / "model.safetensors").string(), out, {{"format", "mlx"}});
  cfg["quantization"] = {{"group_size", group}, {"bits", bits}};
  std::ofstream(fs::path(dst) / "config.json") << cfg.dump(2) << "\n";
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string fn = e.path().filename().string();
    if (!e.is_regular_file() || fn == "config.json" || fn.ends_with(".safetensors") ||
        fn == "model.safetensors.index.json")
      continue;
    fs::copy_file(e.path(), fs::path(dst) / fn, fs::copy_options::overwrite_existing);
  }
  return rep;
}

}  // namespace ingot::quant
