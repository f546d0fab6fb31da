// CUDA implementations of the ops: the signatures of lib/cpu/cpu_ops.h plus the stream. fp32 and fp16
// tensors (fp16 storage, fp32 arithmetic); weights (bias, gamma, beta, tables) share the input's dtype.
// Shapes are checked by the front ends in lib/ops; these check only what the GPU adds (device, dtype).
#pragma once

#include <cuda_runtime_api.h>

#include "ops/op_types.h"

namespace seqtrans::cuda {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options, cudaStream_t stream);
void add_bias(Tensor& x, const Tensor& bias, cudaStream_t stream);
void bias_activation(Tensor& x, const Tensor& bias, Activation activation, cudaStream_t stream);
void gated_activation(const Tensor& gate_up, Tensor& out, cudaStream_t stream);
// The fused forms of ops::matmul_gated_activation and ops::matmul_bias_residual: false (and nothing done)
// where the small-rows kernels do not take the product, and the caller runs the ops one by one.
bool fused_matmul_gated_activation(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out,
                                   cudaStream_t stream);
bool fused_matmul_bias_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                Tensor& out, cudaStream_t stream);
// ops::rms_norm_matmul and ops::add_residual_rms_norm_matmul_gated: the RMS norm (of x + residual, written to
// sum, where residual is given) in the small-rows kernel's prologue, the product (gated: SwiGLU's) after it.
struct RmsNormProduct {
  const ops::RmsNormWeights& norm;
  const Tensor& weight;
  const Tensor* bias = nullptr;
  bool gated = false;
  const Tensor* residual = nullptr;
  Tensor* sum = nullptr;
};
bool fused_rms_norm_matmul(const Tensor& x, const RmsNormProduct& product, Tensor& out, cudaStream_t stream);
// ops::layer_norm_matmul on one fp16 row: layer_norm's warp kernel in the small-rows kernel's prologue; false
// (and nothing done) where that kernel does not take the product.
bool fused_layer_norm_matmul(const Tensor& x, const ops::LayerNormWeights& norm, const Tensor& weight,
                             const ops::MatmulOptions& options, Tensor& out, cudaStream_t stream);
// ops::project_self_attention_step on one fp16 row: the norm in the small-rows kernel's prologue, the query
// and cache writes of append_self_attention_step (and its rotation) in its epilogue; false (and nothing done)
// where that kernel does not take the product. query: [1, query width].
bool fused_project_self_attention_step(const Tensor& x, const ops::InputNorm& norm, const Tensor& weight,
                                       const ops::SelfAttentionStepCaches& caches,
                                       const ops::SelfAttentionStepOptions& options, Tensor& query,
                                       cudaStream_t stream);
void add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                  const ops::LayerNormWeights& norm, Tensor& out, cudaStream_t stream);
void layer_norm(const Tensor& x, const ops::LayerNormWeights& norm, Tensor& out, cudaStream_t stream);
void add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out, cudaStream_t stream);
// ops::add_bias_residual_norm: sum = add_bias_residual's, out = layer_norm's of it.
void add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                            const ops::LayerNormWeights& norm, Tensor& sum, Tensor& out, cudaStream_t stream);
// ops::rms_norm of x; with a residual, ops::add_residual_rms_norm: *sum = x + residual, out its norm.
void rms_norm(const Tensor& x, const Tensor* residual, const ops::RmsNormWeights& norm, Tensor* sum, Tensor& out,
              cudaStream_t stream);
void add_bias_split(const Tensor& x, const Tensor& bias, std::vector<Tensor>& parts, cudaStream_t stream);
// Out-of-range ids or positions give zero rows here (the CPU throws): a kernel cannot throw.
void embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const ops::EmbeddingOptions& options,
           Tensor& out, cudaStream_t stream);
void sinusoid_table(Tensor& out, cudaStream_t stream);
// A token whose position is outside the table is left as it is (the CPU throws).
void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const ops::RotaryShape& shape,
                            cudaStream_t stream);
// key_rows entries outside keys' batch rows cannot throw here (the CPU does): rank 1, the query row gets
// zeros as if it had no keys; rank 2, that key is masked out of the softmax (a row left with no valid key
// gets zeros). Rank 2 always takes the decode kernel.
void attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
               const ops::AttentionOptions& options, Tensor& out, cudaStream_t stream);
// One launch. A slot whose position, cache row or history row is outside its tensor gets its query row but
// writes nothing to the caches or the history (the CPU throws, except for the negative cache rows of padding).
void append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                Tensor& history, const ops::SelfAttentionStepOptions& options, Tensor& query,
                                cudaStream_t stream);
// Out-of-range indices give zero rows (the CPU throws).
void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out, cudaStream_t stream);
void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination,
                       cudaStream_t stream);
// Any dtype; one cudaMemcpyAsync on the stream (graph capturable). src and dst must not overlap.
void copy(const Tensor& src, Tensor& dst, cudaStream_t stream);
// Any dtype; one cudaMemcpy2DAsync on the stream (graph capturable), rows as pitches (one plain copy when
// the rows are equal, a copy per row past the device's pitch limit).
void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst,
                       cudaStream_t stream);
// Any dtype; one launch. Rows outside dst are skipped (the CPU throws).
void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst, cudaStream_t stream);
// fp32 <-> fp16 (round to nearest even); same dtype copies.
void convert(const Tensor& x, Tensor& out, cudaStream_t stream);

// ---- the persistent decoder step (ops::persistent_decoder_step) ----

// Shape limits of the kernel (max_keys: the longest key list a row may read, history or memory).
bool persistent_decoder_fits(DataType dtype, int64_t rows, int64_t width, int64_t ffn, int64_t heads, int64_t layers,
                             int64_t max_keys);
// Whether the kernel that runs this shape can fold the greedy output layer in (its products on CUDA cores).
bool persistent_output_fits(DataType dtype, int64_t rows, int64_t width, int64_t ffn, int64_t heads, int64_t max_keys,
                            int64_t vocab);
// Device bytes the step needs beside its output (the grid barrier and the activations between phases, the
// folded output layer's partial results).
size_t persistent_decoder_workspace_bytes(int64_t rows, int64_t width, int64_t ffn, DataType dtype);
// trace (optional): [2 * (8 * layers + 2)] int32, the phases' boundaries in nanoseconds (uint64 pairs).
void persistent_decoder_step(const Tensor& x, const std::vector<ops::PersistentDecoderLayer>& layers,
                             const ops::PersistentDecoderStep& step, const ops::PersistentGreedyOutput* output,
                             Tensor& workspace, Tensor* trace, Tensor& out, cudaStream_t stream);

// ---- fused output layer ----

// Per row of logits [rows, V]: z = logits + bias, log-probs z - logsumexp(z), and the k best of them,
// best first, ties to the lower index, -inf entries (masked or suppressed) ordered like any other value.
// values: [rows, k] fp32; indices: [rows, k] int32. Equals a full sort's first k exactly.
// The options and their TopkAlgorithm are the front end's (lib/ops/ops.h): FullScan is the radix select,
// Hierarchical the group threshold below.
void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& indices,
                      cudaStream_t stream);
// bitmap [ceil(V / 32)] int32: bit i set when id i is in ids [n] int32 (ops::suppression_bitmap).
void write_suppression_bitmap(const Tensor& ids, Tensor& bitmap, cudaStream_t stream);

// Hugging Face's repetition controls in place (ops::penalize_repetitions), one block per row. History ids
// outside the vocabulary are skipped (the CPU throws).
void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const ops::RepetitionOptions& options, cudaStream_t stream);

// ---- sampling output layer ----

// ops::sample_tokens on the device: the same draws as the CPU (core/sampling_math.h). logits: [rows, V]
// fp32; rows: [rows, kSamplingRowWords] int32 on the device; bias fp32. One block per row.
void sample_tokens(const Tensor& logits, const Tensor& rows, const ops::SampleOptions& options, Tensor& ids,
                   Tensor& log_probs, cudaStream_t stream);

}  // namespace seqtrans::cuda
