// Model shapes several tests build, written once.
#pragma once
#include "scenarios/scenario.hpp"

namespace clustersim::test {

// Llama 3 8B (Meta's config: hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
// vocabulary 128256, untied embedding and output layer), at sequence 8192.
inline ModelSpec llama3_8b() {
  ModelSpec m;
  m.family = ModelFamily::llama;
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.seq_len = 8192;
  m.tie_embeddings = false;
  return m;
}

}  // namespace clustersim::test
