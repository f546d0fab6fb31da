#include "layers/dense.h"

namespace seqtrans {

Dense::Dense(const WeightLoader& weights, const std::string& scope, int64_t in_features, int64_t out_features,
             bool with_bias) {
  if (with_bias) bias_ = weights.get(scope + "/bias", {out_features});
  DenseWeight weight = weights.get_dense(scope + "/weight", {out_features, in_features});
  weight_ = std::move(weight.weight);
  prepared_ = std::move(weight.prepared);
}

Tensor Dense::forward(const Tensor& x, std::optional<Activation> activation) const {
  return ops::matmul(x, weight_, options(true, activation));
}

ops::MatmulOptions Dense::options(bool with_bias, std::optional<Activation> activation) const {
  ops::MatmulOptions options;
  if (with_bias && bias_.defined()) options.bias = &bias_;
  options.activation = activation;
  options.prepared_b = prepared_.get();
  return options;
}

LayerNorm::LayerNorm(const WeightLoader& weights, const std::string& scope, int64_t width, float epsilon)
    : gamma_(weights.get(scope + "/gamma", {width})), beta_(weights.get(scope + "/beta", {width})), epsilon_(epsilon) {}

ops::ResidualNorm SublayerNorm::output(const Dense& dense, const Tensor& x, const Tensor& residual,
                                      const LayerNorm* next) const {
  if (placement_ == NormPlacement::Post)
    return {ops::add_bias_residual_layer_norm(dense.project(x), dense.bias(), residual, norm_.weights()), Tensor()};
  // One row: the next product normalizes the sum in its prologue (product_of_input), one launch fewer.
  if (next != nullptr && x.dim(0) > 1)
    return ops::add_bias_residual_norm(dense.project(x), dense.bias(), residual, next->weights());
  return {ops::matmul_bias_residual(x, dense.weight(), dense.bias(), residual, dense.prepared()), Tensor()};
}

Tensor SublayerNorm::product_of_input(const ops::ResidualNorm& x, const Dense& dense,
                                      const ops::MatmulOptions& options) const {
  if (placement_ == NormPlacement::Pre && !x.normalized.defined())
    return ops::layer_norm_matmul(x.sum, norm_.weights(), dense.weight(), options);
  return ops::matmul(input(x), dense.weight(), options);
}

Tensor SublayerNorm::project_self_attention_step(const ops::ResidualNorm& x, const Dense& dense,
                                                 const ops::SelfAttentionStepCaches& caches,
                                                 ops::SelfAttentionStepOptions options) const {
  options.bias = &dense.bias();
  const ops::MatmulOptions product = dense.options(false);
  if (placement_ == NormPlacement::Pre && !x.normalized.defined()) {
    const ops::LayerNormWeights weights = norm_.weights();
    return ops::project_self_attention_step(x.sum, {&weights, nullptr}, dense.weight(), product, caches, options);
  }
  return ops::project_self_attention_step(input(x), {}, dense.weight(), product, caches, options);
}

}  // namespace seqtrans
