// A linear layer y = x W^T + b with PyTorch's [out, in] weight layout.
#pragma once

#include <string>

#include "layers/weights.h"
#include "ops/ops.h"

namespace seqtrans {

class Dense {
 public:
  Dense() = default;
  // with_bias false: the model has no bias here (Llama's projections); bias() is then undefined.
  Dense(const WeightLoader& weights, const std::string& scope, int64_t in_features, int64_t out_features,
        bool with_bias = true);

  // x: [m, in] -> [m, out], bias (if any) added, then the activation if any (fused into the GEMM where possible).
  Tensor forward(const Tensor& x, std::optional<Activation> activation = std::nullopt) const;
  // x W^T without the bias, for callers that fuse the bias into the next op.
  Tensor project(const Tensor& x) const { return ops::matmul(x, weight_, options(false)); }
  // What forward (with_bias) or project passes to ops::matmul: the bias only where with_bias and one exists.
  ops::MatmulOptions options(bool with_bias, std::optional<Activation> activation = std::nullopt) const;

  const Tensor& weight() const { return weight_; }  // [out, in]
  const Tensor& bias() const { return bias_; }      // [out], or undefined
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
// residual stream. The stream passes from sublayer to sublayer as an ops::ResidualNorm: `sum` the stream itself,
// `normalized` the pre-norm input of the sublayer it goes to, where the sublayer before computed it with its
// residual sum (one pass over the rows instead of two); undefined where none did (post-norm stacks, a pre-norm
// stack's first sublayer).
class SublayerNorm {
 public:
  SublayerNorm() = default;
  SublayerNorm(const WeightLoader& weights, const std::string& scope, int64_t width, const SublayerNormShape& shape)
      : norm_(weights, scope, width, shape.epsilon), placement_(shape.placement) {}

  // The norm of the sublayer's input, which the sublayer before folds into its output (pre-norm); null where
  // the norm is on the output (post-norm).
  const LayerNorm* input_norm() const { return placement_ == NormPlacement::Pre ? &norm_ : nullptr; }
  // The sublayer's input: x.sum (post-norm) or layer_norm(x.sum) (pre-norm: x.normalized where it is defined).
  // [m, d].
  Tensor input(const ops::ResidualNorm& x) const {
    if (placement_ == NormPlacement::Post) return x.sum;
    return x.normalized.defined() ? x.normalized : norm_.forward(x.sum);
  }
  // input(x) W^T with `options` (Dense::options): where the pre-norm input is still to be computed, the norm
  // and the product are one op (ops::layer_norm_matmul: one kernel at batch 1 on the GPU).
  Tensor product_of_input(const ops::ResidualNorm& x, const Dense& dense, const ops::MatmulOptions& options) const;
  // The self-attention step from x: ops::project_self_attention_step of the product product_of_input would
  // compute (without the bias, which the step adds: dense's), its norm taken as product_of_input takes it.
  Tensor project_self_attention_step(const ops::ResidualNorm& x, const Dense& dense,
                                     const ops::SelfAttentionStepCaches& caches,
                                     ops::SelfAttentionStepOptions options) const;
  // The stream after the sublayer, from its last projection `dense` of `x`. Post-norm: layer_norm(x W^T + b +
  // residual), nothing normalized (the next sublayer's norm is on its own output). Pre-norm: residual +
  // (x W^T + b) with `next` of it (ops::add_bias_residual_norm), where `next`, the norm the stream goes through
  // next (the next sublayer's input norm, or the stack's final norm), is given and there are several rows; else
  // the sum alone, folded into the product where the backend can (ops::matmul_bias_residual), and at one row the
  // next product normalizes it in its prologue (product_of_input). [m, d] each.
  ops::ResidualNorm output(const Dense& dense, const Tensor& x, const Tensor& residual, const LayerNorm* next) const;
  const LayerNorm& norm() const { return norm_; }
  NormPlacement placement() const { return placement_; }

 private:
  LayerNorm norm_;
  NormPlacement placement_ = NormPlacement::Post;
};

}  // namespace seqtrans
