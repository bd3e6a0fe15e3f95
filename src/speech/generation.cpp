#include "speech/generation.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/strings.h"

namespace ingot::speech {

using nlohmann::json;

namespace {

std::vector<int32_t> ints(const json& j, const char* key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (it->is_number_integer()) out.push_back(it->get<int32_t>());
  if (it->is_array())
    for (const json& v : *it)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  return out;
}

int32_t int_or(const json& j, const char* key, int32_t def) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int32_t>() : def;
}

}  // namespace

bool WhisperGeneration::is_eos(int32_t t) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), t) != eos_token_ids.end();
}

std::string WhisperGeneration::language_of(int32_t id) const {
  for (const auto& [name, tid] : lang_to_id)
    if (tid == id && name.size() > 4) return name.substr(2, name.size() - 4);
  return "";
}

int32_t WhisperGeneration::language_token(const std::string& lang) const {
  std::string want = starts_with(lang, "<|") ? lang : "<|" + lang + "|>";
  for (const auto& [name, id] : lang_to_id)
    if (name == want) return id;
  fail(ErrorKind::InvalidArgument, "unknown language '", lang, "' for this model");
}

WhisperGeneration load_whisper_generation(const std::string& dir, const ModelConfig& cfg) {
  WhisperGeneration g;
  g.decoder_start_token_id = static_cast<int32_t>(cfg.get_int("decoder_start_token_id", 0));
  g.eos_token_ids = cfg.eos_token_ids;
  std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  if (!file_exists(path)) return g;
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, path, ": ", e.what());
  }
  if (!j.is_object()) return g;
  g.decoder_start_token_id = int_or(j, "decoder_start_token_id", g.decoder_start_token_id);
  auto eos = ints(j, "eos_token_id");
  if (!eos.empty()) g.eos_token_ids = eos;
  g.suppress_tokens = ints(j, "suppress_tokens");
  g.begin_suppress_tokens = ints(j, "begin_suppress_tokens");
  if (j.contains("lang_to_id") && j["lang_to_id"].is_object())
    for (auto it = j["lang_to_id"].begin(); it != j["lang_to_id"].end(); ++it)
      if (it->is_number_integer()) g.lang_to_id.emplace_back(it.key(), it->get<int32_t>());
  if (j.contains("task_to_id") && j["task_to_id"].is_object()) {
    g.transcribe_id = int_or(j["task_to_id"], "transcribe", -1);
    g.translate_id = int_or(j["task_to_id"], "translate", -1);
  }
  g.no_timestamps_id = int_or(j, "no_timestamps_token_id", -1);
  if (g.no_timestamps_id > 0) g.no_speech_id = g.no_timestamps_id - 1;
  g.prev_sot_id = int_or(j, "prev_sot_token_id", -1);
  g.max_initial_timestamp_index = int_or(j, "max_initial_timestamp_index", g.max_initial_timestamp_index);
  g.is_multilingual = j.contains("is_multilingual") && j["is_multilingual"].is_boolean()
                          ? j["is_multilingual"].get<bool>()
                          : !g.lang_to_id.empty();
  if (j.contains("alignment_heads") && j["alignment_heads"].is_array())
    for (const json& p : j["alignment_heads"])
      if (p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number_integer())
        g.alignment_heads.emplace_back(p[0].get<int>(), p[1].get<int>());
  return g;
}

}  // namespace ingot::speech
