// Op front ends: each checks shapes, then dispatches once on the device to cpu:: or cuda::.
// Shapes are given in brackets; d = model width, m = rows (tokens), V = vocabulary size.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/prepared_weight.h"

namespace seqtrans {

enum class Activation { Relu, Gelu, GeluTanh, Swish };

// SinusoidalSplit: Marian's (channel k of a half turns at 10000^(-2k / width)); SinusoidalFairseq: M2M-100's
// (10000^(-k / (half - 1))); both sin over the first half of the channels and cos over the second.
enum class PositionEncoding { SinusoidalSplit, Learned, SinusoidalFairseq };

namespace ops {

// [m, n] = alpha * [m, k] x [n, k]^T (transpose_b) or alpha * [m, k] x [k, n].
struct MatmulOptions {
  bool transpose_b = true;
  float alpha = 1.0f;
  // c in fp32 whatever the inputs: fp16 logits would round away the margins search decides on.
  bool fp32_output = false;
  // Epilogue: c = activation(a x b + bias), bias [n] in c's dtype. CUDA fuses it into the GEMM (cuBLASLt)
  // for fp16 with no activation or ReLU, and runs a separate kernel otherwise.
  const Tensor* bias = nullptr;
  std::optional<Activation> activation;  // needs a bias
  // b prepared at load for this device (ops::prepare_weight(b, ...), transpose_b and alpha 1 only).
  const PreparedWeight* prepared_b = nullptr;
};
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
// in one pass where the backend can (CUDA, a few fp16 rows, outside batch-invariant mode).
Tensor matmul_gated_activation(const Tensor& x, const Tensor& weight, const Tensor* bias = nullptr);

// add_bias_residual(matmul(x, weight), bias, residual): the same values, in one pass where the backend can
// (as matmul_gated_activation). `prepared_b`: the weight's prepared layout for the unfused product, if any.
Tensor matmul_bias_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                            const PreparedWeight* prepared_b = nullptr);

// Post-norm residual block end: layer_norm(x + bias + residual). x, residual: [m, d]; bias, gamma, beta: [d].
struct LayerNormWeights {
  const Tensor& gamma;  // [d]
  const Tensor& beta;   // [d]
  float epsilon;
};
Tensor add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm);

// Pre-norm residual block end: residual + (x + bias). x, residual: [m, d]; bias: [d].
Tensor add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual);

// layer_norm(x) over the last axis. x: [m, d].
Tensor layer_norm(const Tensor& x, const LayerNormWeights& norm);

// Hugging Face's LlamaRMSNorm over the last axis: y = weight * (x * rsqrt(mean(x^2) + epsilon)), the mean
// and the scaling in fp32, the scaled row rounded to x's dtype before the weight multiplies it (HF's order).
// x: [m, d]; weight: [d], x's dtype.
struct RmsNormWeights {
  const Tensor& weight;  // [d]
  float epsilon;
};
Tensor rms_norm(const Tensor& x, const RmsNormWeights& norm);

// A decoder-only layer's residual step and the next norm in one pass: sum = residual + x (rounded to x's
// dtype, as HF's h = h + sublayer(h)) and normalized = rms_norm(sum). x, residual: [m, d].
struct ResidualNorm {
  Tensor sum;         // the new residual stream
  Tensor normalized;  // the next sublayer's input
};
ResidualNorm add_residual_rms_norm(const Tensor& x, const Tensor& residual, const RmsNormWeights& norm);

// Adds the bias and splits [m, parts * d] into `parts` contiguous [m, d] tensors (the fused QKV projection).
std::vector<Tensor> add_bias_split(const Tensor& x, const Tensor& bias, int parts);

// Token embeddings times `scale` plus position encodings.
// ids, positions: [n] int32; table: [V, d]; position_table: [max_positions, d] (Learned only) -> [n, d].
struct EmbeddingOptions {
  float scale = 1.0f;
  PositionEncoding positions = PositionEncoding::SinusoidalSplit;
  // Learned: [max_positions + position_offset, d] in the table's dtype. SinusoidalFairseq is given as such a
  // table too (sinusoid_table of that kind), with positions = Learned.
  const Tensor* position_table = nullptr;
  // Added to every position before its encoding is looked up or evaluated (ModelConfig::position_offset).
  int position_offset = 0;
  // Sinusoidal positions only, optional: sinusoid_table(P, width) on the table's device, read for positions
  // below P instead of evaluating the sinusoid per element (the same values).
  const Tensor* sinusoid_table = nullptr;
};
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
struct RotaryShape {
  int num_heads = 1;
  int num_kv_heads = 1;
};
void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const RotaryShape& shape);

// Multi-head scaled dot-product attention with per-row key lengths (keys at or past the length are
// masked). query: [b, tq, d]; keys, values: [b, tk, d_kv] (tk may be a cache capacity; d_kv = d unless
// num_kv_heads says otherwise); key_lengths: [b] int32 -> [b, tq, d]. Causality is expressed by key_lengths
// (incremental decoding, or a query row per token with length position + 1), never by a mask.
// Causal packed prefill: token i of prompts packed one after another is query row i (tq = 1) with key_rows
// [n] its prompt's first token, key_span the longest prompt and key_lengths[i] its position + 1.
// Chunked prefill over the block pool: each token of the chunk is a query row (tq = 1) with its own copy of
// its prompt's history row as key_rows [n, T] (gather_rows of the history by history_rows, after
// append_self_attention_step wrote the chunk) and length position + 1. Chosen over tq rows sharing one
// history row because the decode kernels run it unchanged; the price is that each query reads its keys
// itself (a kernel sharing them across a chunk's queries would read them once).
struct AttentionOptions {
  int num_heads = 1;
  float scale = 1.0f;
  // Where the keys and values of query row b live when not in batch row b of keys/values (whose batch
  // extent may then differ from the query's). Rank 1, [b] int32: all in batch row key_rows[b]
  // (cross-attention: the beams of a sentence share its memory). Rank 2, [b, T] int32: key j in batch
  // row key_rows[b, j] at position j % tk (the self-attention cache, in blocks of tk positions: beam
  // reorders move only these indices; T may exceed tk, and lengths are then bounded by T); tq = 1.
  // Only entries of keys below the length are read (a history table may hold anything past it); one of
  // them outside keys' batch rows is an error (the CUDA backend masks it instead, see cuda_ops.h).
  const Tensor* key_rows = nullptr;
  // Rank-1 key_rows only: the keys of query row b run from position 0 of batch row key_rows[b] on through
  // the rows after it, up to key_span positions (keys [n, tk, d] read as [n * tk, d]; lengths are bounded
  // by key_span instead of tk). The encoder memory pool, [positions, 1, d], holds each sentence as a run of
  // positions this way. 0: a row's keys stay in its batch row.
  int64_t key_span = 0;
  // Grouped-query attention: keys and values hold num_kv_heads heads (d_kv = num_kv_heads * d / num_heads),
  // and query head h reads kv head h / (num_heads / num_kv_heads), the pairing of Hugging Face's repeat_kv.
  // 0: as many as num_heads.
  int num_kv_heads = 0;
  // The CPU may evaluate the softmax's exp vectorized instead of with libm (not the exact path's bits; the
  // int8 precision, cpu/approximate_math.h). Other devices ignore it.
  bool approximate_exp = false;
};
Tensor attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                 const AttentionOptions& options);

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
struct SelfAttentionStepOptions {
  const Tensor* bias = nullptr;  // [qkv width], qkv's dtype; none: the rows as they are
  // qkv rows are [query_width + 2 d_kv], d_kv the caches' width (kv heads * head size beside heads * head
  // size). 0: as wide as the caches, qkv [s, 3d].
  int64_t query_width = 0;
  const Tensor* cache_rows = nullptr;  // [s] int32, as above
  // [s] int32: slot s records its cache row in history row history_rows[s] instead of row s (history [R, T],
  // any R): the tokens of a prompt's prefill chunk, one slot each, fill their prompt's row. Pairs (history
  // row, position) must be distinct.
  const Tensor* history_rows = nullptr;
  // Rotary positions (Llama): the query and key heads of each row are rotated by its position before they
  // are written, as apply_rotary_embedding(qkv, positions, *rotary, rotary_shape) would rotate qkv first
  // (the same values; CUDA does it in the same pass). [positions, head_dim] fp32 (rotary_table); no bias
  // with it. Null: none.
  const Tensor* rotary = nullptr;
  RotaryShape rotary_shape;
};
Tensor append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                  Tensor& history, const SelfAttentionStepOptions& options);

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
// How the k best of a row are found; every method is exact (ties to the lower id). The CPU always scans.
enum class TopkAlgorithm {
  Auto,          // CUDA: Hierarchical where the vocabulary makes enough groups, else FullScan
  FullScan,      // CUDA radix select: a histogram of each key's top bits bounds the k-th best, one more pass
                 // gathers the candidates
  Hierarchical,  // retrieve-then-rerank: group maxima give a threshold, only groups above it are re-read
};
inline constexpr int kMaxDeviceTopk = 64;  // the GPU's largest k (beam search asks for 2 x beam)
// The vocabularies where Hierarchical can be forced at every k up to kMaxDeviceTopk, whatever the dtype and
// alignment: each row makes at least k groups (of at most 64 ids) and their maxima fit shared memory.
// Forcing it elsewhere may be an error; Auto then scans.
inline constexpr int64_t kMinHierarchicalTopkVocab = 64 * kMaxDeviceTopk;
inline constexpr int64_t kMaxHierarchicalTopkVocab = 262144;
inline bool hierarchical_topk_fits(int64_t vocab) {
  return vocab >= kMinHierarchicalTopkVocab && vocab <= kMaxHierarchicalTopkVocab;
}
struct TopkOptions {
  int k = 1;                               // 1 <= k <= V, and <= kMaxDeviceTopk on the GPU; 1 is a fused argmax
  const Tensor* bias = nullptr;            // [V], the logits' dtype or fp32
  const Tensor* suppressed_ids = nullptr;  // [n] int32, set to -inf after normalization
  // Optional: suppression_bitmap(*suppressed_ids, V), made once and passed with the ids so that a decoder
  // step does not build it again (the GPU reads the bitmap; the CPU, the ids).
  const Tensor* suppressed_bitmap = nullptr;
  TopkAlgorithm algorithm = TopkAlgorithm::Auto;
  // false: the logits already are log-probs (penalize_repetitions normalized and processed them, as HF's
  // beam search does): the k best are returned as they are.
  bool normalize = true;
};
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
struct RepetitionOptions {
  float penalty = 1.0f;     // 1 = off
  int no_repeat_ngram = 0;  // 0 = off
  const Tensor* bias = nullptr;  // [V] fp32
  bool normalize = false;
};
void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const RepetitionOptions& options);

// One row's sampling settings, packed into int32 words for the device ([rows, kSamplingRowWords]).
// Hugging Face's warpers in HF's order: temperature, then top-k, top-p and min-p.
struct SamplingRow {
  float temperature = 1.0f;
  int32_t top_k = 0;        // 0 = the whole vocabulary
  float top_p = 1.0f;       // 1 = off
  float min_p = 0.0f;       // 0 = off
  int32_t banned_id = -1;   // an id this row must not draw (EOS before the minimum length); -1 = none
  uint32_t seed_low = 0, seed_high = 0;
  uint32_t line_low = 0, line_high = 0;  // the input line: the draw's random stream
  uint32_t step = 0;                     // tokens the sample generated before this draw
  uint32_t sample = 0;                   // the sample's index among the line's samples
};
inline constexpr int64_t kSamplingRowWords = sizeof(SamplingRow) / sizeof(int32_t);
static_assert(sizeof(SamplingRow) % sizeof(int32_t) == 0, "sampling rows travel as int32 words");

// The packed rows on the host: [rows.size(), kSamplingRowWords] int32.
Tensor sampling_rows_tensor(const std::vector<SamplingRow>& rows);

// The sampling output layer: per row of logits [rows, V] (fp32), z = logits + bias; masked ids (the
// suppressed ids and the row's banned id) are excluded; x = z / temperature; top-k, top-p and min-p filter
// x; one token is drawn from what is left with the row's Philox bits (core/sampling_math.h says how).
// ids: [rows] int32, -1 where no token can be drawn; log_probs: [rows] fp32, the drawn token's
// log_softmax(z) over the whole row (the model's log-prob: temperature and filters do not enter it).
// The CPU and CUDA backends draw the same token from the same logits.
struct SampleOptions {
  const Tensor* bias = nullptr;             // [V] fp32
  const Tensor* suppressed_ids = nullptr;   // [n] int32
  const Tensor* suppressed_bitmap = nullptr;  // optional, as in TopkOptions
};
void sample_tokens(const Tensor& logits, const Tensor& rows, const SampleOptions& options, Tensor& ids,
                   Tensor& log_probs);

// Element type conversion (fp32 <-> fp16), on the tensor's device.
Tensor convert(const Tensor& x, DataType dtype);

// ---- the persistent decoder step (CUDA; a few rows) ----

// Every layer of a post-norm decoder step in one launch that stays resident on every multiprocessor
// (cuda/kernels/persistent_decoder.cu says how): what DecoderLayer::step computes layer after layer, for at
// most kPersistentDecoderMaxRows rows. The tensors of one layer (Dense weights [out, in], biases [out], norms
// [d]) and its caches, as in DecoderLayerCache.
inline constexpr int64_t kPersistentDecoderMaxRows = 16;
inline constexpr int64_t kPersistentDecoderMaxLayers = 16;
inline constexpr size_t kPersistentDecoderMaxSharedBytes = 200 * 1024;
// The phases of a layer in the kernel, in order, as `seqtrans bench --profile` names them (each name starts
// with the prefix), and the last one.
inline constexpr const char* kPersistentDecoderStagePrefix = "persistent: ";
inline constexpr int64_t kPersistentDecoderPhasesPerLayer = 8;
inline constexpr const char* kPersistentDecoderPhaseNames[kPersistentDecoderPhasesPerLayer] = {
    "persistent: QKV",           "persistent: self-attention", "persistent: self output", "persistent: cross query",
    "persistent: cross-attention", "persistent: cross output", "persistent: FFN inner",   "persistent: FFN outer"};
inline constexpr const char* kPersistentDecoderFinalPhase = "persistent: final norm";
// The rest of the kernel's wall time: its launch, the step's inputs read at its start, and the return.
inline constexpr const char* kPersistentDecoderLaunchPhase = "persistent: launch and return";
struct PersistentDecoderLayer {
  const Tensor *qkv_weight, *qkv_bias, *self_output_weight, *self_output_bias, *self_gamma, *self_beta;
  const Tensor *cross_query_weight, *cross_query_bias, *cross_output_weight, *cross_output_bias, *cross_gamma,
      *cross_beta;
  const Tensor *inner_weight, *inner_bias, *outer_weight, *outer_bias, *ffn_gamma, *ffn_beta;
  Tensor *self_keys, *self_values;            // [blocks, B, d]
  const Tensor *cross_keys, *cross_values;    // [positions, 1, d]
};
// The step's inputs, as DecoderStepInputs holds them ([rows] int32 each; history [>= rows, T] int32). With a
// reorder ([rows] int32), row r continues history row reorder[r] (a beam's parent): the kernel reads the
// older entries through it and rewrites rows 0..rows-1 in place after its last read, so the history needs
// no reordered copy; without one, row r continues row r.
struct PersistentDecoderStep {
  const Tensor *positions, *key_lengths, *memory_starts, *source_lengths, *cache_rows;
  Tensor* history;
  int64_t source_span = 0;
  int num_heads = 1;
  float epsilon = 1e-5f;
  Activation activation = Activation::Relu;
  const Tensor* reorder = nullptr;
};
// The output layer folded into the persistent step, for greedy search: each row's best id that the bitmap
// does not suppress and its log-prob, z - logsumexp(z) over the whole vocabulary with z = x W^T + bias,
// written as log_softmax_topk writes k = 1 (ties to the lower id). Saves the logits' product, the argmax and
// their launches; persistent_output_fits says for which shapes.
struct PersistentGreedyOutput {
  const Tensor* weight = nullptr;             // [V, d], x's dtype
  const Tensor* bias = nullptr;               // [V] fp32 (the model keeps it so), or none
  const Tensor* suppressed_bitmap = nullptr;  // suppression_bitmap(ids, V), or none
  Tensor* values = nullptr;                   // [rows] fp32 (any shape of rows elements)
  Tensor* ids = nullptr;                      // [rows] int32
};
inline constexpr const char* kPersistentDecoderFinalOutputPhase = "persistent: final norm and output layer";
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
