// Every built-in family registers itself from here (one call per family file).
#pragma once

namespace ingot {

void register_decoder_family();     // llama, mistral, qwen2, qwen3
void register_gemma_family();       // gemma2, gemma3_text
void register_gemma4_family();      // gemma4_text
void register_qwen3_moe_family();   // qwen3_moe
void register_hybrid_family();      // qwen3_next, qwen3_5_text (gated DeltaNet + attention)
inline void register_builtin_families() {
  register_decoder_family();
  register_gemma_family();
  register_gemma4_family();
  register_qwen3_moe_family();
  register_hybrid_family();
}

}  // namespace ingot
