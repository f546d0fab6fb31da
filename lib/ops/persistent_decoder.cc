#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {
namespace {

constexpr const char* kOp = "persistent_decoder_step";

void check_matrix(const char* operand, const Tensor* weight, const Tensor* bias, int64_t out, int64_t in,
                  const Tensor& x) {
  check_rank(kOp, operand, *weight, 2);
  check_extent(kOp, operand, *weight, 0, out);
  check_extent(kOp, operand, *weight, 1, in);
  check_like(kOp, operand, *weight, x);
  check_rank(kOp, operand, *bias, 1);
  check_extent(kOp, operand, *bias, 0, out);
  check_like(kOp, operand, *bias, x);
}

void check_norm(const char* operand, const Tensor* gamma, const Tensor* beta, const Tensor& x) {
  for (const Tensor* part : {gamma, beta}) {
    check_rank(kOp, operand, *part, 1);
    check_extent(kOp, operand, *part, 0, x.dim(1));
    check_like(kOp, operand, *part, x);
  }
}

void check_layer(const PersistentDecoderLayer& layer, const Tensor& x, int64_t ffn) {
  const int64_t d = x.dim(1);
  check_matrix("qkv", layer.qkv_weight, layer.qkv_bias, 3 * d, d, x);
  check_matrix("self output", layer.self_output_weight, layer.self_output_bias, d, d, x);
  check_norm("self norm", layer.self_gamma, layer.self_beta, x);
  check_matrix("cross query", layer.cross_query_weight, layer.cross_query_bias, d, d, x);
  check_matrix("cross output", layer.cross_output_weight, layer.cross_output_bias, d, d, x);
  check_norm("cross norm", layer.cross_gamma, layer.cross_beta, x);
  check_matrix("ffn inner", layer.inner_weight, layer.inner_bias, ffn, d, x);
  check_matrix("ffn outer", layer.outer_weight, layer.outer_bias, d, ffn, x);
  check_norm("ffn norm", layer.ffn_gamma, layer.ffn_beta, x);
  for (const Tensor* cache : {static_cast<const Tensor*>(layer.self_keys), static_cast<const Tensor*>(layer.self_values),
                              layer.cross_keys, layer.cross_values}) {
    check_rank(kOp, "cache", *cache, 3);
    check_extent(kOp, "cache", *cache, 2, d);
    check_like(kOp, "cache", *cache, x);
  }
  SEQTRANS_CHECK(layer.self_values->shape() == layer.self_keys->shape() &&
                     layer.cross_values->shape() == layer.cross_keys->shape() && layer.cross_keys->dim(1) == 1,
                 "{}: the caches' shapes do not match", kOp);
}

void check_step(const PersistentDecoderStep& step, const Tensor& x) {
  const int64_t rows = x.dim(0);
  for (const Tensor* input : {step.positions, step.key_lengths, step.memory_starts, step.source_lengths, step.cache_rows,
                              step.reorder}) {
    if (input == nullptr) continue;  // no reorder: each row continues its own history row
    check_rank(kOp, "step input", *input, 1);
    check_extent(kOp, "step input", *input, 0, rows);
    check_dtype(kOp, "step input", *input, DataType::I32);
  }
  check_rank(kOp, "history", *step.history, 2);
  SEQTRANS_CHECK(step.history->dim(0) >= rows, "{}: a history of {} rows for {} rows", kOp, step.history->dim(0), rows);
  check_dtype(kOp, "history", *step.history, DataType::I32);
  if (step.pre_norm) {
    SEQTRANS_CHECK(step.final_gamma != nullptr && step.final_beta != nullptr,
                   "{}: a pre-norm step needs the stack's final norm", kOp);
    check_norm("final norm", step.final_gamma, step.final_beta, x);
  }
}

void check_output(const PersistentGreedyOutput& output, const Tensor& x) {
  check_rank(kOp, "output weight", *output.weight, 2);
  check_extent(kOp, "output weight", *output.weight, 1, x.dim(1));
  check_like(kOp, "output weight", *output.weight, x);
  const int64_t vocab = output.weight->dim(0);
  if (output.bias != nullptr) {
    check_rank(kOp, "output bias", *output.bias, 1);
    check_extent(kOp, "output bias", *output.bias, 0, vocab);
    check_dtype(kOp, "output bias", *output.bias, DataType::F32);
    SEQTRANS_CHECK(output.bias->device() == x.device(), "{}: the output bias is not on x's device", kOp);
  }
  if (output.suppressed_bitmap != nullptr) {
    check_rank(kOp, "suppressed bitmap", *output.suppressed_bitmap, 1);
    check_extent(kOp, "suppressed bitmap", *output.suppressed_bitmap, 0, (vocab + 31) / 32);
    check_dtype(kOp, "suppressed bitmap", *output.suppressed_bitmap, DataType::I32);
    SEQTRANS_CHECK(output.suppressed_bitmap->device() == x.device(), "{}: the suppressed bitmap is not on x's device",
                   kOp);
  }
  SEQTRANS_CHECK(output.values != nullptr && output.values->dtype() == DataType::F32 &&
                     output.values->elements() == x.dim(0) && output.values->device() == x.device(),
                 "{}: the best values must be {} fp32 elements on x's device", kOp, x.dim(0));
  SEQTRANS_CHECK(output.ids != nullptr && output.ids->dtype() == DataType::I32 &&
                     output.ids->elements() == x.dim(0) && output.ids->device() == x.device(),
                 "{}: the best ids must be {} int32 elements on x's device", kOp, x.dim(0));
}

}  // namespace

bool persistent_decoder_fits(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                             const PersistentDecoderStep& step) {
#ifdef SEQTRANS_WITH_CUDA
  if (x.device() != Device::CUDA || x.rank() != 2 || layers.empty() || step.cache_rows == nullptr) return false;
  const int64_t max_keys = std::max(step.history->dim(1), step.source_span);  // the longest list a row reads
  return cuda::persistent_decoder_fits(x.dtype(), x.dim(0), x.dim(1), layers.front().inner_weight->dim(0),
                                       step.num_heads, static_cast<int64_t>(layers.size()), max_keys);
#else
  (void)x, (void)layers, (void)step;
  return false;
#endif
}

bool persistent_output_fits(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                            const PersistentDecoderStep& step, const PersistentGreedyOutput& output) {
#ifdef SEQTRANS_WITH_CUDA
  if (x.device() != Device::CUDA || x.rank() != 2 || layers.empty() || output.weight == nullptr) return false;
  const int64_t max_keys = std::max(step.history->dim(1), step.source_span);
  return cuda::persistent_output_fits(x.dtype(), x.dim(0), x.dim(1), layers.front().inner_weight->dim(0),
                                      step.num_heads, max_keys, output.weight->dim(0));
#else
  (void)x, (void)layers, (void)step, (void)output;
  return false;
#endif
}

Tensor persistent_decoder_step(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                               const PersistentDecoderStep& step, const PersistentGreedyOutput* output) {
  check_rank(kOp, "x", x, 2);
  check_float(kOp, "x", x);
  SEQTRANS_CHECK(persistent_decoder_fits(x, layers, step),
                 "{}: {} rows of width {} over {} layers do not fit the persistent kernel (CUDA only)", kOp, x.dim(0),
                 x.dim(1), layers.size());
  const int64_t ffn = layers.front().inner_weight->dim(0);
  for (const PersistentDecoderLayer& layer : layers) check_layer(layer, x, ffn);
  check_step(step, x);
  if (output != nullptr) {
    SEQTRANS_CHECK(persistent_output_fits(x, layers, step, *output),
                   "{}: {} rows do not fit the folded output layer", kOp, x.dim(0));
    check_output(*output, x);
  }
  Tensor out(x.shape(), x.dtype(), x.device());
#ifdef SEQTRANS_WITH_CUDA
  const size_t bytes = cuda::persistent_decoder_workspace_bytes(x.dim(0), x.dim(1), ffn, x.dtype());
  Tensor workspace({static_cast<int64_t>((bytes + 3) / 4)}, DataType::I32, x.device());
  if (!Profiler::instance().enabled()) {
    SEQTRANS_ON_CUDA(persistent_decoder_step, x, layers, step, output, workspace, nullptr, out);
    return out;
  }
  // Profiling: the kernel stamps each phase's end, and every phase becomes a stage of its own.
  const int64_t phases = kPersistentDecoderPhasesPerLayer * static_cast<int64_t>(layers.size()) + 1;
  Tensor trace({2 * (phases + 1)}, DataType::I32, x.device());
  const auto start = std::chrono::steady_clock::now();
  SEQTRANS_ON_CUDA(persistent_decoder_step, x, layers, step, output, workspace, &trace, out);
  const std::vector<int32_t> words = trace.to_int_vector();  // waits for the kernel
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<uint64_t> stamps(static_cast<size_t>(phases + 1));
  std::memcpy(stamps.data(), words.data(), stamps.size() * sizeof(uint64_t));
  double in_phases = 0.0;
  const char* final_phase = output != nullptr ? kPersistentDecoderFinalOutputPhase : kPersistentDecoderFinalPhase;
  for (int64_t phase = 0; phase < phases; ++phase) {
    const double seconds = static_cast<double>(stamps[phase + 1] - stamps[phase]) * 1e-9;
    const bool last = phase + 1 == phases;
    Profiler::instance().add(last ? final_phase : kPersistentDecoderPhaseNames[phase % kPersistentDecoderPhasesPerLayer],
                             seconds);
    in_phases += seconds;
  }
  Profiler::instance().add(kPersistentDecoderLaunchPhase, std::max(0.0, wall - in_phases));
#endif
  return out;
}

}  // namespace seqtrans::ops
