// attend_row_avx2: attend_row_portable's operations in its order, regrouped for AVX2 (see attention_rows.h).
// What changes is only where values wait: the portable build reduces each dot product's 16 lanes on its own
// (a chain of shuffles per key and head) and adds each weighted value row into memory; here eight keys'
// lanes are reduced together, one shuffle serving eight sums, and each head's output is summed in registers.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/attention_rows.h"
#include "cpu/simd.h"


namespace seqtrans::cpu {

#if defined(__x86_64__)
namespace {

constexpr int64_t kMaxHeads = 256;  // attention() refuses more
// A head's output is summed in at most this many registers of 8 floats at a time (64 channels).
constexpr int kMaxOutputRegisters = 8;

#define SEQTRANS_AVX2 __attribute__((target("avx2"), always_inline)) inline

// The portable dot's 16 lanes for channels [0, head_dim), folded once (lane l += lane l + 8): lanes 0-7.
SEQTRANS_AVX2 __m256 dot_lanes(const float* q, const float* k, int64_t head_dim) {
  __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
  for (int64_t c = 0; c < head_dim; c += 16) {
    low = _mm256_add_ps(low, _mm256_mul_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(k + c)));
    high = _mm256_add_ps(high, _mm256_mul_ps(_mm256_loadu_ps(q + c + 8), _mm256_loadu_ps(k + c + 8)));
  }
  return _mm256_add_ps(low, high);
}

// The rest of one dot's pairwise sum: l += l + 4, l += l + 2, l += l + 1.
SEQTRANS_AVX2 float fold_lanes(__m256 lanes) {
  const __m128 fours = _mm_add_ps(_mm256_castps256_ps128(lanes), _mm256_extractf128_ps(lanes, 1));
  const __m128 twos = _mm_add_ps(fours, _mm_movehl_ps(fours, fours));
  return _mm_cvtss_f32(_mm_add_ss(twos, _mm_shuffle_ps(twos, twos, 1)));
}

// fold_lanes of eight dots at once, element i of the result from s[i]: each add below is the portable
// build's add for every one of the eight dots.
SEQTRANS_AVX2 __m256 fold_lanes8(const __m256* s) {
  // l += l + 4: dot a's low half beside dot b's, then their high halves.
  __m256 fours[4];
  for (int i = 0; i < 4; ++i)
    fours[i] = _mm256_add_ps(_mm256_permute2f128_ps(s[2 * i], s[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(s[2 * i], s[2 * i + 1], 0x31));
  // l += l + 2: within each 128-bit lane, [a0 a1 b0 b1] + [a2 a3 b2 b3].
  __m256 twos[2];
  for (int i = 0; i < 2; ++i)
    twos[i] = _mm256_add_ps(_mm256_shuffle_ps(fours[2 * i], fours[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm256_shuffle_ps(fours[2 * i], fours[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // l += l + 1: dots 0 2 4 6 in the low 128 bits, 1 3 5 7 in the high ones; then in order.
  const __m256 ones = _mm256_add_ps(_mm256_shuffle_ps(twos[0], twos[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(twos[0], twos[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(ones, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// scores[j] = dot(q, k_j) * scale for one head over all keys.
SEQTRANS_AVX2 void head_scores(const AttentionRow& row, const float* q, int64_t kv_offset, float* scores) {
  const __m256 scale = _mm256_set1_ps(row.scale);
  int64_t j = 0;
  for (; j + 8 <= row.key_len; j += 8) {
    __m256 lanes[8];
    for (int i = 0; i < 8; ++i)
      lanes[i] = dot_lanes(q, row.keys + row.key_offsets[j + i] + kv_offset, row.head_dim);
    _mm256_storeu_ps(scores + j, _mm256_mul_ps(fold_lanes8(lanes), scale));
  }
  for (; j < row.key_len; ++j)
    scores[j] = fold_lanes(dot_lanes(q, row.keys + row.key_offsets[j] + kv_offset, row.head_dim)) * row.scale;
}

// The portable softmax, unchanged: exp in float (libm), the total in double in key order.
SEQTRANS_AVX2 double exponentiate(float* scores, int64_t key_len) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < key_len; ++j) max_score = std::max(max_score, scores[j]);
  double total = 0.0;
  for (int64_t j = 0; j < key_len; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    total += scores[j];
  }
  return total;
}

// scores[j] = float(scores[j] / total), the division in double as the portable build does it.
SEQTRANS_AVX2 void normalize(float* scores, int64_t key_len, double total) {
  const __m256d totals = _mm256_set1_pd(total);
  int64_t j = 0;
  for (; j + 4 <= key_len; j += 4)
    _mm_storeu_ps(scores + j, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm_loadu_ps(scores + j)), totals)));
  for (; j < key_len; ++j) scores[j] = static_cast<float>(scores[j] / total);
}

// out[c] for c in [0, 8 * Registers) of one head: sum over keys of weight_j * v_j[c], from 0, in key order.
template <int Registers>
SEQTRANS_AVX2 void weighted_sum(const AttentionRow& row, const float* weights, int64_t value_offset, float* out) {
  __m256 sums[Registers];
  for (int r = 0; r < Registers; ++r) sums[r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < row.key_len; ++j) {
    const __m256 weight = _mm256_set1_ps(weights[j]);
    const float* v = row.values + row.key_offsets[j] + value_offset;
    for (int r = 0; r < Registers; ++r) sums[r] = _mm256_add_ps(sums[r], _mm256_mul_ps(weight, _mm256_loadu_ps(v + 8 * r)));
  }
  for (int r = 0; r < Registers; ++r) _mm256_storeu_ps(out + 8 * r, sums[r]);
}

// One head's output, in chunks of kMaxOutputRegisters registers (head_dim / 8 is even).
SEQTRANS_AVX2 void head_output(const AttentionRow& row, const float* weights, int64_t kv_offset, float* out) {
  for (int64_t c = 0; c < row.head_dim; c += 8 * kMaxOutputRegisters) {
    switch (std::min<int64_t>(kMaxOutputRegisters, (row.head_dim - c) / 8)) {
      case 2: weighted_sum<2>(row, weights, kv_offset + c, out + c); break;
      case 4: weighted_sum<4>(row, weights, kv_offset + c, out + c); break;
      case 6: weighted_sum<6>(row, weights, kv_offset + c, out + c); break;
      default: weighted_sum<8>(row, weights, kv_offset + c, out + c); break;
    }
  }
}

}  // namespace

bool attend_row_avx2_fits(int64_t head_dim) { return head_dim > 0 && head_dim % 16 == 0; }

__attribute__((target("avx2"))) void attend_row_avx2(const AttentionRow& row, float* scores) {
  const int64_t width = row.heads * row.head_dim;
  double totals[kMaxHeads];
  for (int64_t t = 0; t < row.query_len; ++t) {
    const float* q_row = row.query + (row.b * row.query_len + t) * width;
    float* out_row = row.out + (row.b * row.query_len + t) * width;
    for (int64_t h = 0; h < row.heads; ++h) {
      float* head = scores + h * row.key_len;
      head_scores(row, q_row + h * row.head_dim, row.kv_offsets[h], head);
      totals[h] = exponentiate(head, row.key_len);
    }
    for (int64_t h = 0; h < row.heads; ++h) {
      float* head = scores + h * row.key_len;
      normalize(head, row.key_len, totals[h]);
      head_output(row, head, row.kv_offsets[h], out_row + h * row.head_dim);
    }
  }
}

#else  // not x86-64: the portable build everywhere

bool attend_row_avx2_fits(int64_t) { return false; }
void attend_row_avx2(const AttentionRow& row, float* scores) { attend_row_portable(row, scores); }

#endif

}  // namespace seqtrans::cpu
