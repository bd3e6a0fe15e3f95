// Every built-in family registers itself from here (one call per family file).
#pragma once

namespace ingot {

void register_decoder_family();  // llama, mistral, qwen2, qwen3
inline void register_builtin_families() { register_decoder_family(); }

}  // namespace ingot
