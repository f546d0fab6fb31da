// Every tensor a model of a given config holds (encoder-decoder or decoder-only): scoped names and shapes, in one place
// (proto/model.proto documents the same list). Used to build random models and test files.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "format/model_config.h"
#include "format/model_file.h"

namespace seqtrans {

enum class TensorRole { Weight, Bias, NormScale, NormShift, Embedding };

struct TensorSpec {
  std::string name;
  Shape shape;
  TensorRole role;
};

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config);

// A model with random weights (normal, `spread` standard deviation; layer-norm scales around 1), held in
// memory: what `seqtrans bench --synthetic` runs. Its tokenizer is empty: feed it token ids.
struct RandomModelOptions {
  uint64_t seed = 1;
  float spread = 0.05f;  // the standard deviation of the draws
  // Uniform draws of the same spread from a counter hash, on every core: a 7B-parameter model in seconds
  // instead of minutes of normal draws. For timing (bench --synthetic); tests keep the normal draws.
  bool quick = false;
};
ModelFile make_random_model(const ModelConfig& config, const RandomModelOptions& options);

// Transformer-base (Vaswani et al.): 6+6 layers, d_model 512, 8 heads, ffn 2048, vocab 32000, shared
// and tied embeddings, Marian conventions otherwise. The default shape of the synthetic benchmark.
ModelConfig transformer_base_config();

}  // namespace seqtrans
