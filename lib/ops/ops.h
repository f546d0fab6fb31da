// Op front ends: each checks shapes, then dispatches once on the device to cpu:: or cuda::. Their argument
// types are in ops/op_types.h, which the backends include (they sit below this file: docs/ARCHITECTURE.md).
// Shapes are given in brackets; d = model width, m = rows (tokens), V = vocabulary size.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/op_types.h"
#include "ops/prepared_weight.h"

namespace seqtrans {
namespace ops {

// [m, n] = alpha * [m, k] x [n, k]^T (transpose_b) or alpha * [m, k] x [k, n].
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options = {});

// x[i, :] += bias, in place. x: [m, n], bias: [n].
void add_bias(Tensor& x, const Tensor& bias);

// x = activation(x + bias), in place. x: [m, n], bias: [n].
void bias_activation(Tensor& x, const Tensor& bias, Activation activation);

// SwiGLU, Llama's MLP between its projections: silu(gate) * up for gate_up [m, 2f] -> [m, f], the gate the
// first f columns and up the last f (gate_proj and up_proj as one matmul). silu(gate) is rounded to x's
// dtype before the product, as Hugging Face's act_fn(gate_proj(x)) * up_proj(x) rounds it.
Tensor gated_activation(const Tensor& gate_up);

// gated_activation(matmul(x, weight, {bias})) (weight [2 f, k], as matmul's transposed b): the same values,
// in one pass where the backend can (CUDA, a few fp16 rows, outside batch-invariant mode). `prepared_b`, here
// and in the fused ops below: the weight's prepared layout for the unfused product, if any.
Tensor matmul_gated_activation(const Tensor& x, const Tensor& weight, const Tensor* bias = nullptr,
                               const PreparedWeight* prepared_b = nullptr);

// layer_norm(x) W^T with options' bias and activation, as layer_norm then matmul compute it; one kernel on one
// fp16 CUDA row (the norm in the product's prologue: a pre-norm sublayer's input at batch 1).
Tensor layer_norm_matmul(const Tensor& x, const LayerNormWeights& norm, const Tensor& weight,
                         const MatmulOptions& options = {});
// matmul(rms_norm(x, norm), weight, {bias}) (weight [n, k] as matmul's transposed b): the same values, the
// norm in the product's prologue where the backend can (CUDA, one fp16 row, outside batch-invariant mode:
// a Llama layer's attention norm and QKV projection at batch 1).
Tensor rms_norm_matmul(const Tensor& x, const RmsNormWeights& norm, const Tensor& weight, const Tensor* bias = nullptr,
                       const PreparedWeight* prepared_b = nullptr);

// add_residual_rms_norm(x, residual, norm), then matmul_gated_activation(normalized, weight, bias): the
// residual stream and the feed-forward's SwiGLU, the same values, in one pass where the backend can (as
// rms_norm_matmul).
ResidualGated add_residual_rms_norm_matmul_gated(const Tensor& x, const Tensor& residual, const RmsNormWeights& norm,
                                                 const Tensor& weight, const Tensor* bias = nullptr,
                                                 const PreparedWeight* prepared_b = nullptr);

// add_bias_residual(matmul(x, weight), bias, residual): the same values, in one pass where the backend can
// (as matmul_gated_activation).
Tensor matmul_bias_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                            const PreparedWeight* prepared_b = nullptr);

// Post-norm residual block end: layer_norm(x + bias + residual). x, residual: [m, d]; bias, gamma, beta: [d].
Tensor add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm);

// Pre-norm residual block end: residual + (x + bias). x, residual: [m, d]; bias: [d].
Tensor add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual);

// layer_norm(x) over the last axis. x: [m, d].
Tensor layer_norm(const Tensor& x, const LayerNormWeights& norm);

// Hugging Face's LlamaRMSNorm over the last axis: y = weight * (x * rsqrt(mean(x^2) + epsilon)), the mean
// and the scaling in fp32, the scaled row rounded to x's dtype before the weight multiplies it (HF's order).
// x: [m, d]; weight: [d], x's dtype.
Tensor rms_norm(const Tensor& x, const RmsNormWeights& norm);

// A decoder-only layer's residual step and the next norm in one pass: sum = residual + x (rounded to x's
// dtype, as HF's h = h + sublayer(h)) and normalized = rms_norm(sum). x, residual: [m, d].
ResidualNorm add_residual_rms_norm(const Tensor& x, const Tensor& residual, const RmsNormWeights& norm);

// A pre-norm sublayer's end and the next norm in one pass: sum = add_bias_residual(x, bias, residual) and
// normalized = layer_norm(sum), bit for bit what those two ops give. x, residual: [m, d]; bias, gamma, beta:
// [d]. The bias is required, as add_bias_residual's is (a sublayer without one would pass zeros: x + 0 is exact).
ResidualNorm add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm);

// Adds the bias and splits [m, parts * d] into `parts` contiguous [m, d] tensors (the fused QKV projection).
std::vector<Tensor> add_bias_split(const Tensor& x, const Tensor& bias, int parts);

// Token embeddings times `scale` plus position encodings.
// ids, positions: [n] int32; table: [V, d]; position_table: [max_positions, d] (Learned only) -> [n, d].
Tensor embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const EmbeddingOptions& options);

// The sinusoidal position encoding of positions [0, positions) as a table [positions, width] fp32 on
// `device`, each entry what embed adds for it (evaluated once, by the device's own formula). SinusoidalFairseq
// is evaluated on the host in fp32 as Hugging Face's M2M-100 builds its table, then copied to the device.
Tensor sinusoid_table(int64_t positions, int64_t width, Device device,
                      PositionEncoding kind = PositionEncoding::SinusoidalSplit);

// Rotary position embedding, Hugging Face Llama's (LlamaRotaryEmbedding, default rope type). The table
// [positions, head_dim] fp32 on `device`: row p holds cos(p * inv_freq[i]) for i < head_dim / 2, then the sin of
// the same angles, where inv_freq[i] = 1 / theta^(float(2i) / head_dim) and the angle are fp32 as HF computes
// them. Built once on the host (cos and sin nearest to HF's fp32 values, the same on every device), then copied.
Tensor rotary_table(int64_t positions, int64_t head_dim, float theta, Device device);

// Rotates in place the query and key heads of fused QKV rows qkv [n, (heads + 2 kv_heads) * head_dim] (queries,
// keys, then the values, left alone) by each token's position ([n] int32, inside the table), as HF's
// apply_rotary_pos_emb does with rotate_half: channels i and i + head_dim / 2 of a head pair up, x1 * cos -
// x2 * sin and x2 * cos + x1 * sin. In fp16 it rounds as HF does: cos and sin to fp16, each product, the sum.
// Matching that rounding rather than one rounding of an fp32 result keeps fp16 runs equal to HF's fp16
// reference bit for bit (both are within an fp16 ulp of the exact value).
void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const RotaryShape& shape);

// Multi-head scaled dot-product attention with per-row key lengths (keys at or past the length are
// masked). query: [b, tq, d]; keys, values: [b, tk, d_kv] (tk may be a cache capacity; d_kv = d unless
// num_kv_heads says otherwise); key_lengths: [b] int32 -> [b, tq, d]. Causality is expressed by key_lengths
// (incremental decoding, or a query row per token with length position + 1), never by a mask.
// Causal packed prefill: token i of prompts packed one after another is query row i (tq = 1) with key_rows
// [n] its prompt's first token, key_span the longest prompt and key_lengths[i] its position + 1.
// Chunked prefill over the block pool: each token of the chunk is a query row (tq = 1) with its own copy of
// its prompt's history row as key_rows [n, T] (gather_rows of the history by history_rows, after
// append_self_attention_step wrote the chunk) and length position + 1. Both packed forms give query_tiles,
// so that the CUDA backend reads a run's keys once per tile of its queries, on tensor cores.
Tensor attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                 const AttentionOptions& options);

// AttentionOptions::query_tiles for rows packed run after run (a sentence's tokens, a prompt's chunk), each
// run split into tiles of up to kAttentionTileRows rows: [tiles, 2] int32 on `device`.
Tensor attention_query_tiles(const std::vector<int32_t>& run_lengths, Device device);

// The decoder self-attention step between the QKV projection and the attention, in one pass: adds the
// bias to qkv [s, 3d] and returns the query [s, d]; writes the key and value rows into key_cache and
// value_cache [S >= s, capacity, d] at (slot, positions[slot]) and sets history[slot, positions[slot]] = slot
// (history: [s, capacity] int32, the key_rows of AttentionOptions). positions: [s] int32, each inside the
// capacity. qkv, bias and the caches share one dtype. With cache_rows ([s] int32), the caches are a pool of
// blocks of `capacity` positions: slot s writes position p = positions[s] in block cache_rows[s] at p %
// capacity and sets history[s, p] = cache_rows[s] (history [s, T], p < T); a negative entry writes nothing
// (a graph's padding row).
Tensor append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                  Tensor& value_cache, Tensor& history, const Tensor* cache_rows = nullptr);

// The same step for any split of qkv and without a bias (decoder-only models: grouped-query attention,
// Llama's unbiased projection), and for a prefill's tokens that share a history row.
Tensor append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                  Tensor& history, const SelfAttentionStepOptions& options);

// append_self_attention_step(norm(x) W^T, caches..., options): the self-attention step from its input, the
// same values. `product` holds the product's options (no bias: options.bias is the step's, added after the
// product is rounded, as the two ops add it). One kernel on one fp16 CUDA row outside batch-invariant mode:
// the product's epilogue writes the query and the caches (rotating them first, with rotary positions).
Tensor project_self_attention_step(const Tensor& x, const InputNorm& norm, const Tensor& weight,
                                   const MatmulOptions& product, const SelfAttentionStepCaches& caches,
                                   const SelfAttentionStepOptions& options);

// dst = src, same shape and dtype, queued on the device like any other op (a CUDA graph can hold it).
void copy(const Tensor& src, Tensor& dst);

// dst[i, :lengths[i], ...] = src[index[i], :lengths[i], ...] (src row i without an index) for i < r, where
// src [n, m, ...] and dst [n', m', ...] share trailing extents, lengths [r] int32 (at most min(m, m')),
// index [r] int32 or null. Rows past r and positions past each length are left as they are: a pool that
// grows or a table that follows beam reorders copies only what was written, never uninitialized memory.
void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst);

// dst[rows[i], :m, ...] = src[i, :m, ...] for src [n, m, ...], rows [n] int32 (distinct, inside dst) and
// dst [P, m' >= m, ...] with equal trailing extents: sentences' encoder memory moved into a pool's rows.
void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst);

// out[i] = x[indices[i]] along the first axis. x: [n, ...]; indices: [m] int32 -> [m, ...].
Tensor gather_rows(const Tensor& x, const Tensor& indices);

// destination = source (both [n] int32, by a kernel on a GPU: no copy engine), except that each of the
// first `fed` entries holding -(r + 1) takes chosen[r, 0] instead: a decoder input fed the token the step
// before chose for row r, without the host reading it (chosen [rows] or [rows, k] int32; may be null when
// nothing is fed).
void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination);

// The fused output layer: per row of logits [rows, V], z = logits + bias, log-probs z - logsumexp(z),
// suppressed ids set to -inf after normalization (Hugging Face's order), and the k best log-probs with
// their ids, best first, ties to the lower id -- without writing the normalized row anywhere.
// values: [rows, k] fp32; ids: [rows, k] int32, both on the logits' device.
// values and ids (as sample_tokens' outputs) are written where the caller placed them when they already have
// their shape, dtype and device (a step puts both in one buffer, for one copy to the host); else made.
void log_softmax_topk(const Tensor& logits, const TopkOptions& options, Tensor& values, Tensor& ids);

// The suppressed ids ([n] int32) as a bitmap of a vocabulary of `vocab`, for the options above: [ceil(V /
// 32)] int32 words on the GPU; undefined on the CPU, whose kernels read the ids.
Tensor suppression_bitmap(const Tensor& ids, int64_t vocab);

// Hugging Face's repetition controls, in place on logits [rows, V] fp32, in HF's order: z = logits + bias
// (with `normalize`, z - logsumexp(z): HF's beam search processes log-probs); then, per row, the repetition
// penalty on each distinct id of the row's history (z < 0 ? z * penalty : z / penalty,
// RepetitionPenaltyLogitsProcessor); then the ids that would complete an n-gram already in the history go to
// -inf (NoRepeatNGramLogitsProcessor). history: [rows, T] int32, row r's decoder inputs so far (the start
// id, the generated ids, the id fed at this step) in its first lengths[r] entries; lengths: [rows] int32.
// The output layer then reads the logits without the bias.
void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const RepetitionOptions& options);

// The packed rows on the host: [rows.size(), kSamplingRowWords] int32.
Tensor sampling_rows_tensor(const std::vector<SamplingRow>& rows);

// The sampling output layer: per row of logits [rows, V] (fp32), z = logits + bias; masked ids (the
// suppressed ids and the row's banned id) are excluded; x = z / temperature; top-k, top-p and min-p filter
// x; one token is drawn from what is left with the row's Philox bits (core/sampling_math.h says how).
// ids: [rows] int32, -1 where no token can be drawn; log_probs: [rows] fp32, the drawn token's
// log_softmax(z) over the whole row (the model's log-prob: temperature and filters do not enter it).
// The CPU and CUDA backends draw the same token from the same logits.
void sample_tokens(const Tensor& logits, const Tensor& rows, const SampleOptions& options, Tensor& ids,
                   Tensor& log_probs);

// Element type conversion (fp32 <-> fp16), on the tensor's device.
Tensor convert(const Tensor& x, DataType dtype);

// ---- the persistent decoder step (CUDA; a few rows) ----

// Every layer of a post-norm decoder step in one launch that stays resident on every multiprocessor
// (cuda/kernels/persistent_decoder.cu says how): what DecoderLayer::step computes layer after layer, for at
// most kPersistentDecoderMaxRows rows. The tensors of one layer (Dense weights [out, in], biases [out], norms
// [d]) and its caches, as in DecoderLayerCache (PersistentDecoderLayer and the limits: ops/op_types.h).

// Whether the persistent step runs this shape: a CUDA tensor x [rows, d], rows and layers within the limits,
// head width <= 128, and the rows' inputs and keys within the kernel's shared memory.
bool persistent_decoder_fits(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                             const PersistentDecoderStep& step);
// Whether the step can fold this output layer in (the rows' products on CUDA cores: fp16 up to 2 rows).
bool persistent_output_fits(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                            const PersistentDecoderStep& step, const PersistentGreedyOutput& output);
// x [rows, d] (the embedded tokens) -> the last layer's output [rows, d]; appends the step's keys and values
// to the caches and the history, like the layers' steps. With `output`, also selects each row's best token.
// Throws where persistent_decoder_fits (and persistent_output_fits) does not hold.
Tensor persistent_decoder_step(const Tensor& x, const std::vector<PersistentDecoderLayer>& layers,
                               const PersistentDecoderStep& step, const PersistentGreedyOutput* output = nullptr);

}  // namespace ops
}  // namespace seqtrans
