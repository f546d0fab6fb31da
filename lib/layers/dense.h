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
  Tensor project(const Tensor& x) const {
    ops::MatmulOptions options;
    options.prepared_b = prepared_.get();
    return ops::matmul(x, weight_, options);
  }

  const Tensor& weight() const { return weight_; }  // [out, in]
  const Tensor& bias() const { return bias_; }      // [out]
  const ops::PreparedWeight* prepared() const { return prepared_.get(); }

 private:
  Tensor weight_;
  Tensor bias_;
  std::shared_ptr<const ops::PreparedWeight> prepared_;  // weight_ laid out for the device's products, or none
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

// Where a sublayer's layer norm sits (StackConfig::pre_norm): after the residual sum (post-norm: Marian,
// the original Transformer) or on the sublayer's input (pre-norm: mBART, M2M-100, NLLB).
enum class NormPlacement { Post, Pre };

// A sublayer norm's epsilon and placement.
struct SublayerNormShape {
  float epsilon = 1e-5f;
  NormPlacement placement = NormPlacement::Post;
};

// A sublayer's layer norm at its placement: what the sublayer computes on, and how its output joins the
// residual stream.
class SublayerNorm {
 public:
  SublayerNorm() = default;
  SublayerNorm(const WeightLoader& weights, const std::string& scope, int64_t width, const SublayerNormShape& shape)
      : norm_(weights, scope, width, shape.epsilon), placement_(shape.placement) {}

  // The sublayer's input: x (post-norm) or layer_norm(x) (pre-norm). x: [m, d].
  Tensor input(const Tensor& x) const { return placement_ == NormPlacement::Pre ? norm_.forward(x) : x; }
  // The sublayer's output from its last projection `dense` of `x`: layer_norm(x W^T + b + residual)
  // (post-norm) or residual + (x W^T + b) (pre-norm, the sum folded into the product where the backend can:
  // ops::matmul_bias_residual). [m, d].
  Tensor output(const Dense& dense, const Tensor& x, const Tensor& residual) const {
    if (placement_ == NormPlacement::Pre)
      return ops::matmul_bias_residual(x, dense.weight(), dense.bias(), residual, dense.prepared());
    return ops::add_bias_residual_layer_norm(dense.project(x), dense.bias(), residual, norm_.weights());
  }
  const LayerNorm& norm() const { return norm_; }
  NormPlacement placement() const { return placement_; }

 private:
  LayerNorm norm_;
  NormPlacement placement_ = NormPlacement::Post;
};

}  // namespace seqtrans
