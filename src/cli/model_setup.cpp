#include "cli/model_setup.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "backend/cpu/thread_pool.h"
#include "parallel/tp_model.h"
#include "registry/local_models.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"
#include "util/strings.h"
#include "util/error.h"
#include "util/log.h"

namespace ingot::cli {

std::string resolve_model_arg(const std::string& arg) { return registry::resolve_model(arg); }

namespace {

// Bytes of a model's weight files: a GGUF file, or a folder's safetensors.
int64_t weight_file_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return static_cast<int64_t>(fs::file_size(path, ec));
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.path().extension() == ".safetensors") total += static_cast<int64_t>(e.file_size(ec));
  return total;
}

std::string gib(int64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(1ll << 30));
  return b;
}

// --device auto: CUDA when a usable GPU is there and the weights fit in 90 %
// of its memory, else the CPU, with the reason. The CUDA backend is opened
// only where an NVIDIA driver is present.
DeviceChoice choose_device(const std::string& model_path) {
  std::string why;
  Device d = Device::CPU;
  std::error_code ec;
  if (!std::filesystem::exists("/proc/driver/nvidia", ec) && !std::filesystem::exists("/dev/nvidiactl", ec)) {
    why = "no NVIDIA driver";
  } else {
    try {
      runtime::enable_device(Device::CUDA);
    } catch (const Error& e) {
      why = e.what();
    }
    if (why.empty() && !runtime::cuda_available()) why = "no usable CUDA device";
    if (why.empty()) {
      const int64_t mem = runtime::device_memory_bytes(Device::CUDA), w = weight_file_bytes(model_path);
      if (w > mem / 10 * 9) {
        why = "the weights (" + gib(w) + ") do not fit the GPU's " + gib(mem);
      } else {
        d = Device::CUDA;
        why = "the weights (" + gib(w) + ") fit the GPU's " + gib(mem);
      }
    }
  }
  log::debug("device ", device_name(d), " (", why, ")");
  return {d, why};
}

}  // namespace

DeviceChoice resolve_device(const ModelFlags& f) {
  if (f.device != "auto") return {parse_device(f.device), "--device " + f.device};
  static std::map<std::string, DeviceChoice> chosen;  // one decision per model
  auto it = chosen.find(f.model);
  if (it == chosen.end()) it = chosen.emplace(f.model, choose_device(f.model)).first;
  return it->second;
}

LoadOptions load_options(const ModelFlags& f) {
  LoadOptions o;
  o.device = resolve_device(f).device;
  runtime::enable_device(o.device);  // opens the CUDA backend only when asked for
  if (f.dtype != "auto") {
    DType t = parse_dtype(f.dtype);
    if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
      fail(ErrorKind::InvalidArgument, "--dtype must be auto, float32, bfloat16 or float16");
    o.dtype = t;
  }
  return o;
}

std::unique_ptr<Model> load_model_from_flags(const ModelFlags& f) {
  if (f.threads < 0) fail(ErrorKind::InvalidArgument, "--threads must be >= 0");
  if (f.threads > 0) cpu::set_num_threads(f.threads);
  if (f.tensor_parallel != 1) return parallel::load_tensor_parallel(f.model, load_options(f), f.tensor_parallel);
  return load_model(f.model, load_options(f));
}

CacheOptions cache_options(const ModelFlags& f) {
  CacheOptions c;
  c.kind = f.kv;
  return c;
}

std::function<std::string(const std::vector<int32_t>&)> text_decoder_for(const std::string& dir) {
  if (file_exists((std::filesystem::path(dir) / "tokenizer.json").string())) {
    std::shared_ptr<Tokenizer> tok = Tokenizer::from_dir(dir);
    return [tok](const std::vector<int32_t>& ids) { return tok->decode(ids, true); };
  }
  return [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
  };
}

void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      fail(ErrorKind::InvalidArgument, "token id ", id, " is out of range (vocabulary size ", vocab, ")");
}

}  // namespace ingot::cli
