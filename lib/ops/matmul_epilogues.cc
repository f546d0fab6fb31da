// A product and the elementwise op after it, as one op: the values are those of the two ops in a row (the
// CPU runs them so, and so does CUDA where its small-rows kernels do not take the product); a few fp16 rows on
// CUDA fold the second into the product's epilogue, one launch and one pass over the output fewer (a decoder
// step of a Llama layer at batch 1).
#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor matmul_gated_activation(const Tensor& x, const Tensor& weight, const Tensor* bias,
                               const PreparedWeight* prepared_b) {
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2 && weight.dim(0) % 2 == 0,
                 "matmul_gated_activation: x {} and weight {} are not [m, k] and [2 f, k]", shape_string(x.shape()),
                 shape_string(weight.shape()));
#ifdef SEQTRANS_WITH_CUDA
  if (x.device() == Device::CUDA && x.dtype() == weight.dtype() && weight.dim(1) == x.dim(1)) {
    Tensor out({x.dim(0), weight.dim(0) / 2}, x.dtype(), x.device());
    const ProfileScope profile("gemm");
    if (cuda::fused_matmul_gated_activation(x, weight, bias, out, cuda::current_stream())) return out;
  }
#endif
  MatmulOptions options;
  options.bias = bias;
  options.prepared_b = prepared_b;
  return gated_activation(matmul(x, weight, options));
}

namespace {

// The fused form applies on this device: CUDA tensors of x's dtype, the weight's inputs as wide as x's rows.
// norm_weight: the norm's scale (RMS weight, layer norm gamma).
bool fusable_on_cuda(const Tensor& x, const Tensor& weight, const Tensor& norm_weight, const Tensor* bias) {
  return x.device() == Device::CUDA && weight.device() == Device::CUDA && norm_weight.device() == Device::CUDA &&
         (bias == nullptr || bias->device() == Device::CUDA) && x.dtype() == weight.dtype() &&
         weight.dim(1) == x.dim(1);
}

}  // namespace

Tensor layer_norm_matmul(const Tensor& x, const LayerNormWeights& norm, const Tensor& weight,
                         const MatmulOptions& options) {
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2, "layer_norm_matmul: x {} and weight {} are not [m, k] and [n, k]",
                 shape_string(x.shape()), shape_string(weight.shape()));
#ifdef SEQTRANS_WITH_CUDA
  if (fusable_on_cuda(x, weight, norm.gamma, options.bias)) {
    Tensor out({x.dim(0), weight.dim(0)}, x.dtype(), x.device());
    const ProfileScope profile("gemm");
    if (cuda::fused_layer_norm_matmul(x, norm, weight, options, out, cuda::current_stream())) return out;
  }
#endif
  return matmul(layer_norm(x, norm), weight, options);
}

Tensor rms_norm_matmul(const Tensor& x, const RmsNormWeights& norm, const Tensor& weight, const Tensor* bias,
                       const PreparedWeight* prepared_b) {
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2, "rms_norm_matmul: x {} and weight {} are not [m, k] and [n, k]",
                 shape_string(x.shape()), shape_string(weight.shape()));
#ifdef SEQTRANS_WITH_CUDA
  if (fusable_on_cuda(x, weight, norm.weight, bias)) {
    Tensor out({x.dim(0), weight.dim(0)}, x.dtype(), x.device());
    const ProfileScope profile("gemm");
    if (cuda::fused_rms_norm_matmul(x, {norm, weight, bias}, out, cuda::current_stream())) return out;
  }
#endif
  MatmulOptions options;
  options.bias = bias;
  options.prepared_b = prepared_b;
  return matmul(rms_norm(x, norm), weight, options);
}

ResidualGated add_residual_rms_norm_matmul_gated(const Tensor& x, const Tensor& residual, const RmsNormWeights& norm,
                                                 const Tensor& weight, const Tensor* bias,
                                                 const PreparedWeight* prepared_b) {
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2 && weight.dim(0) % 2 == 0 && residual.shape() == x.shape(),
                 "add_residual_rms_norm_matmul_gated: x {}, residual {} and weight {} are not [m, k], [m, k] and "
                 "[2 f, k]", shape_string(x.shape()), shape_string(residual.shape()), shape_string(weight.shape()));
#ifdef SEQTRANS_WITH_CUDA
  if (fusable_on_cuda(x, weight, norm.weight, bias) && residual.device() == Device::CUDA && residual.dtype() == x.dtype()) {
    ResidualGated result{Tensor(x.shape(), x.dtype(), x.device()),
                         Tensor({x.dim(0), weight.dim(0) / 2}, x.dtype(), x.device())};
    const ProfileScope profile("gemm");
    if (cuda::fused_rms_norm_matmul(x, {norm, weight, bias, /*gated=*/true, &residual, &result.sum}, result.gated,
                                    cuda::current_stream()))
      return result;
  }
#endif
  ResidualNorm normed = add_residual_rms_norm(x, residual, norm);
  return {std::move(normed.sum), matmul_gated_activation(normed.normalized, weight, bias, prepared_b)};
}

Tensor matmul_bias_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                            const PreparedWeight* prepared_b) {
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2, "matmul_bias_residual: x {} and weight {} are not [m, k] and [n, k]",
                 shape_string(x.shape()), shape_string(weight.shape()));
#ifdef SEQTRANS_WITH_CUDA
  if (x.device() == Device::CUDA && x.dtype() == weight.dtype() && weight.dim(1) == x.dim(1) &&
      residual.shape() == Shape{x.dim(0), weight.dim(0)} && residual.dtype() == x.dtype() &&
      bias.shape() == Shape{weight.dim(0)} && bias.dtype() == x.dtype() && residual.device() == Device::CUDA &&
      bias.device() == Device::CUDA) {
    Tensor out(residual.shape(), x.dtype(), x.device());
    const ProfileScope profile("gemm");
    if (cuda::fused_matmul_bias_residual(x, weight, bias, residual, out, cuda::current_stream())) return out;
  }
#endif
  MatmulOptions options;
  options.prepared_b = prepared_b;
  return add_bias_residual(matmul(x, weight, options), bias, residual);
}

}  // namespace seqtrans::ops
