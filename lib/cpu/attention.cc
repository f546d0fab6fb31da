#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/attention_rows.h"
#include "cpu/cpu_ops.h"
#include "cpu/isa.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

// A part of the batch gets at least this many multiply-adds (see matmul.cc).
constexpr int64_t kMinPartWork = int64_t{1} << 18;
// Heads a row's softmax totals have room for (checked by attention()).
constexpr int64_t kMaxHeads = 256;

// Element offset in keys/values of key j of query row b: batch row b or key_rows[b] at position j (past
// that row's end with a key span), or batch row key_rows[b, j] at position j % block (block = keys'
// positions per row). Only keys below the length are looked up, so a history table may hold anything past it.
void key_offsets(const ops::AttentionOptions& options, int64_t b, int64_t key_len, int64_t key_batch, int64_t block,
                 int64_t width, std::vector<int64_t>& offsets) {
  const Tensor* key_rows = options.key_rows;
  const int32_t* rows = key_rows != nullptr ? key_rows->data<int32_t>() : nullptr;
  const bool per_key = key_rows != nullptr && key_rows->rank() == 2;
  for (int64_t j = 0; j < key_len; ++j) {
    int64_t row = b;
    if (rows != nullptr) {
      const int64_t index = per_key ? b * key_rows->dim(1) + j : b;
      row = rows[index];
      SEQTRANS_CHECK(row >= 0 && row < key_batch,
                     "attention: key_rows entry {} is {}, outside the {} batch rows of keys", index, row, key_batch);
    }
    const int64_t position = row * block + (per_key ? j % block : j);
    SEQTRANS_CHECK(position < key_batch * block, "attention: key {} of row {} runs past the {} positions of keys", j,
                   b, key_batch * block);
    offsets[j] = position * width;
  }
}

// q . k over n channels in 16 independent lanes (vectorized), added pairwise at the end: a single running
// sum would wait on every add.
inline __attribute__((always_inline)) float dot(const float* q, const float* k, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += q[c + l] * k[c + l];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  float sum = lanes[0];
  for (; c < n; ++c) sum += q[c] * k[c];
  return sum;
}

}  // namespace

// Each key and value row is read once for all heads (one contiguous stream instead of a pass per head).
// Built for AVX2 as well as the baseline: the same lanes in wider registers, so the same bits.
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
void attend_row_portable(const AttentionRow& row, float* scores) {
  const int64_t heads = row.heads, head_dim = row.head_dim, width = heads * head_dim, key_len = row.key_len;
  double totals[kMaxHeads];
  for (int64_t t = 0; t < row.query_len; ++t) {
    const float* q_row = row.query + (row.b * row.query_len + t) * width;
    float* out_row = row.out + (row.b * row.query_len + t) * width;
    for (int64_t j = 0; j < key_len; ++j) {
      const float* k_row = row.keys + row.key_offsets[j];
      for (int64_t h = 0; h < heads; ++h)
        scores[h * key_len + j] = dot(q_row + h * head_dim, k_row + row.kv_offsets[h], head_dim) * row.scale;
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* head_weights = scores + h * key_len;
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < key_len; ++j) max_score = std::max(max_score, head_weights[j]);
      double total = 0.0;
      for (int64_t j = 0; j < key_len; ++j) {
        head_weights[j] = std::exp(head_weights[j] - max_score);
        total += head_weights[j];
      }
      totals[h] = total;
    }
    for (int64_t c = 0; c < width; ++c) out_row[c] = 0.0f;
    for (int64_t j = 0; j < key_len; ++j) {
      const float* v_row = row.values + row.key_offsets[j];
      for (int64_t h = 0; h < heads; ++h) {
        const float weight = static_cast<float>(scores[h * key_len + j] / totals[h]);
        float* out_head = out_row + h * head_dim;
        const float* v_head = v_row + row.kv_offsets[h];
        for (int64_t c = 0; c < head_dim; ++c) out_head[c] += weight * v_head[c];
      }
    }
  }
}


void attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
               const ops::AttentionOptions& options, Tensor& out) {
  const int64_t batch = query.dim(0), query_len = query.dim(1), width = query.dim(2);
  const int64_t key_batch = keys.dim(0), block = keys.dim(1), key_width = keys.dim(2);
  const int64_t group = options.num_kv_heads == 0 ? 1 : options.num_heads / options.num_kv_heads;
  // Per-key rows address keys by block: the table's width bounds the lengths (a key span, likewise).
  const bool per_key = options.key_rows != nullptr && options.key_rows->rank() == 2;
  const int64_t key_capacity = per_key ? options.key_rows->dim(1) : options.key_span > 0 ? options.key_span : block;
  SEQTRANS_CHECK(options.num_heads <= kMaxHeads, "attention: {} heads, at most {} on the CPU", options.num_heads,
                 kMaxHeads);
  const float* q = query.data<float>();
  const float* k = keys.data<float>();
  const float* v = values.data<float>();
  const int32_t* lengths = key_lengths.data<int32_t>();
  float* result = out.data<float>();
  const bool avx2 = cpu_isa() != Isa::Portable && attend_row_avx2_fits(width / options.num_heads);
  // Batch rows are independent: dealt to the threads, each with its own scratch.
  const int64_t row_work = std::max<int64_t>(1, query_len * std::min<int64_t>(key_capacity, 64) * width * 2);
  parallel_for(batch, std::max<int64_t>(1, kMinPartWork / row_work), [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(options.num_heads * key_capacity));
    std::vector<int64_t> offsets(static_cast<size_t>(key_capacity));
    int64_t kv_offsets[kMaxHeads];  // where query head h's kv head starts in a key or value row
    AttentionRow row;
    row.query = q;
    row.keys = k;
    row.values = v;
    row.key_offsets = offsets.data();
    row.kv_offsets = kv_offsets;
    row.out = result;
    row.query_len = query_len;
    row.heads = options.num_heads;
    row.head_dim = width / options.num_heads;
    row.scale = options.scale;
    for (int64_t h = 0; h < row.heads; ++h) kv_offsets[h] = h / group * row.head_dim;
    for (int64_t b = begin; b < end; ++b) {
      row.b = b;
      row.key_len = std::clamp<int64_t>(lengths[b], 0, key_capacity);
      key_offsets(options, b, row.key_len, key_batch, block, key_width, offsets);
      if (avx2)
        attend_row_avx2(row, scores.data());
      else
        attend_row_portable(row, scores.data());
    }
  });
}

}  // namespace seqtrans::cpu
