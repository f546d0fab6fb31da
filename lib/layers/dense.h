// A linear layer y = x W^T + b with PyTorch's [out, in] weight layout.
#pragma once

#include <string>

#include "layers/weights.h"
#include "ops/ops.h"

namespace seqtrans {

class Dense {
 public:
  Dense() = default;
  Dense(const WeightLoader& weights, const std::string& scope, int64_t in_features, int64_t out_features);

  // x: [m, in] -> [m, out], bias added, then the activation if any (fused into the GEMM where possible).
  Tensor forward(const Tensor& x, std::optional<Activation> activation = std::nullopt) const;
  // x W^T without the bias, for callers that fuse the bias into the next op.
  Tensor project(const Tensor& x) const { return ops::matmul(x, weight_); }

  const Tensor& weight() const { return weight_; }  // [out, in]
  const Tensor& bias() const { return bias_; }      // [out]

 private:
  Tensor weight_;
  Tensor bias_;
};

// Layer norm parameters of one sublayer.
class LayerNorm {
 public:
  LayerNorm() = default;
  LayerNorm(const WeightLoader& weights, const std::string& scope, int64_t width, float epsilon);

  ops::LayerNormWeights weights() const { return {gamma_, beta_, epsilon_}; }
  Tensor forward(const Tensor& x) const { return ops::layer_norm(x, weights()); }
  const Tensor& gamma() const { return gamma_; }
  const Tensor& beta() const { return beta_; }

 private:
  Tensor gamma_;  // [d]
  Tensor beta_;   // [d]
  float epsilon_ = 1e-5f;
};

}  // namespace seqtrans
