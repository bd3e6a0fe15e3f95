#include "cli/model_setup.h"

#include <filesystem>

#include "backend/cpu/thread_pool.h"
#include "parallel/tp_model.h"
#include "registry/local_models.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"
#include "util/strings.h"
#include "util/error.h"

namespace ingot::cli {

std::string resolve_model_arg(const std::string& arg) { return registry::resolve_model(arg); }

LoadOptions load_options(const ModelFlags& f) {
  LoadOptions o;
  o.device = parse_device(f.device);
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
