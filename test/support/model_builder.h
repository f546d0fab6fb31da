// Writes small random seqtrans model files for tests, with the same layout as scripts/convert_hf.py.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model.pb.h"

namespace seqtrans::testing {

struct TinyModelShape {
  int d_model = 16;
  int heads = 2;
  int ffn = 32;
  int encoder_layers = 2;
  int decoder_layers = 2;
  int vocab = 23;
  int max_positions = 64;
  float weight_spread = 0.3f;
  uint32_t seed = 1;
};

// The header and tensor bytes of a random Marian-like model, before serialization.
struct ModelImage {
  proto::ModelHeader header;
  std::vector<std::string> tensor_bytes;  // parallel to header.tensors()
};

ModelImage make_tiny_model(const TinyModelShape& shape);

// A decoder-only model shaped as a LlamaForCausalLM: RMS norms, rotary positions, grouped-query attention,
// a gated feed-forward block, no biases, BOS-framed prompts (format version 3).
struct TinyLlamaShape {
  int d_model = 16;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 0;  // 0: d_model / heads
  int ffn = 24;
  int layers = 2;
  int vocab = 23;
  int max_positions = 64;
  float rope_theta = 10000.0f;
  bool tied_output = false;
  float weight_spread = 0.3f;
  uint32_t seed = 1;
};

ModelImage make_tiny_llama_model(const TinyLlamaShape& shape);

// Serializes `image` to `path` (magic, header size, header, aligned tensor data).
void write_model_file(const std::string& path, const ModelImage& image);

// A fresh path under the system temp directory, unique per call.
std::string temp_path(const std::string& stem);

}  // namespace seqtrans::testing
