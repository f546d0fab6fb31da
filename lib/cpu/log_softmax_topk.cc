#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "cpu/thread_pool.h"
#include "cpu/vector_math.h"


namespace seqtrans::cpu {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// The k best of a row, ranked by (value descending, id ascending), kept sorted while the row is scanned
// once in id order: a value enters only if it beats the k-th (an equal one has a larger id and does not).
// Each entry also keeps the raw logit its value came from (see select_row).
class TopK {
 public:
  explicit TopK(int k) : k_(k), values_(static_cast<size_t>(k)), raws_(static_cast<size_t>(k)), ids_(static_cast<size_t>(k)) {}

  void clear() { size_ = 0; }
  bool full() const { return size_ == k_; }
  // The raw logit of the k-th entry (when full).
  float kth_raw() const { return raws_[k_ - 1]; }

  void offer(float value, float raw, int32_t id) {
    if (size_ == k_ && !(value > values_[k_ - 1])) return;
    int slot = size_ < k_ ? size_++ : k_ - 1;
    for (; slot > 0 && value > values_[slot - 1]; --slot) {
      values_[slot] = values_[slot - 1];
      raws_[slot] = raws_[slot - 1];
      ids_[slot] = ids_[slot - 1];
    }
    values_[slot] = value;
    raws_[slot] = raw;
    ids_[slot] = id;
  }

  float value(int i) const { return values_[i]; }
  int32_t id(int i) const { return ids_[i]; }

 private:
  int k_, size_ = 0;
  std::vector<float> values_, raws_;
  std::vector<int32_t> ids_;
};

// Ids a block of the scan looks at together: one vector compare answers for all of them.
constexpr int64_t kScanBlock = 16;

// row = logits + bias (NaN as -inf); returns its maximum, the first of equal ones (which matters only
// between -0 and +0).
float raw_row_portable(const float* in, const float* bias, int64_t vocab, float* row) {
  float max_value = kMinusInfinity;
  for (int64_t i = 0; i < vocab; ++i) {
    const float z = bias ? in[i] + bias[i] : in[i];
    row[i] = z != z ? kMinusInfinity : z;  // NaN never wins
    max_value = row[i] > max_value ? row[i] : max_value;
  }
  return max_value;
}

// Whether any of the kScanBlock values at x is above threshold.
bool any_above_portable(const float* x, float threshold) {
  bool any = false;
  for (int64_t l = 0; l < kScanBlock; ++l) any |= x[l] > threshold;
  return any;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) float raw_row_avx2(const float* in, const float* bias, int64_t vocab, float* row) {
  const __m256 minus_infinity = _mm256_set1_ps(kMinusInfinity);
  __m256 maxima = minus_infinity;
  int64_t i = 0;
  for (; i + 8 <= vocab; i += 8) {
    __m256 z = _mm256_loadu_ps(in + i);
    if (bias) z = _mm256_add_ps(z, _mm256_loadu_ps(bias + i));
    z = _mm256_blendv_ps(z, minus_infinity, _mm256_cmp_ps(z, z, _CMP_UNORD_Q));
    _mm256_storeu_ps(row + i, z);
    maxima = _mm256_max_ps(maxima, z);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, maxima);
  float max_value = kMinusInfinity;
  for (float lane : lanes) max_value = lane > max_value ? lane : max_value;
  for (; i < vocab; ++i) {
    const float z = bias ? in[i] + bias[i] : in[i];
    row[i] = z != z ? kMinusInfinity : z;
    max_value = row[i] > max_value ? row[i] : max_value;
  }
  // The lanes lose which of -0 and +0 came first: the portable pass decides.
  return max_value == 0.0f ? raw_row_portable(row, nullptr, vocab, row) : max_value;
}

__attribute__((target("avx2"))) bool any_above_avx2(const float* x, float threshold) {
  const __m256 t = _mm256_set1_ps(threshold);
  const __m256 above = _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), t, _CMP_GT_OQ),
                                    _mm256_cmp_ps(_mm256_loadu_ps(x + 8), t, _CMP_GT_OQ));
  return _mm256_movemask_ps(above) != 0;
}
#endif

float raw_row(const float* in, const float* bias, int64_t vocab, float* row) {
#if defined(__x86_64__)
  if (cpu_isa() != Isa::Portable) return raw_row_avx2(in, bias, vocab, row);
#endif
  return raw_row_portable(in, bias, vocab, row);
}

bool any_above(const float* x, float threshold) {
#if defined(__x86_64__)
  if (cpu_isa() != Isa::Portable) return any_above_avx2(x, threshold);
#endif
  return any_above_portable(x, threshold);
}

// One row: z = logits + bias (NaN as -inf), normalized to (z - max) - log_sum, suppressed ids at -inf, its k
// best into `best`. row: [vocab] scratch.
//
// The normalized row is never written out: normalizing is monotone (each step a rounded subtraction of a
// constant), so z <= the k-th entry's raw z means a value <= the k-th value, which cannot enter. Only ids
// past that test are normalized and offered, in id order as before: the same k best, the same bits.
void select_row(const float* in, const float* bias, int64_t vocab, bool normalize, const int32_t* suppressed,
                int64_t suppressed_count, float* row, TopK& best) {
  const float max_value = raw_row(in, bias, vocab, row);
  // Normalizer with the exp-sum in double; an all -inf row stays -inf (and is left as it is).
  const bool shift = normalize && max_value != kMinusInfinity;
  const float log_sum = shift ? static_cast<float>(std::log(exp_sum(row, vocab, max_value))) : 0.0f;
  // -inf normalizes to -inf: suppressing before normalizing gives what suppressing after it did.
  for (int64_t i = 0; i < suppressed_count; ++i) row[suppressed[i]] = kMinusInfinity;
  const auto offer = [&](int64_t i) {
    const float z = row[i];
    best.offer(shift ? (z - max_value) - log_sum : z, z, static_cast<int32_t>(i));
  };
  best.clear();
  int64_t i = 0;
  for (; i < vocab && !best.full(); ++i) offer(i);
  for (; i + kScanBlock <= vocab; i += kScanBlock) {
    if (!any_above(row + i, best.kth_raw())) continue;
    for (int64_t l = 0; l < kScanBlock; ++l)
      if (row[i + l] > best.kth_raw()) offer(i + l);
  }
  for (; i < vocab; ++i)
    if (row[i] > best.kth_raw()) offer(i);
}

}  // namespace

void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& ids) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const int k = options.k;
  const float* bias = options.bias ? options.bias->data<float>() : nullptr;
  const int32_t* suppressed = options.suppressed_ids ? options.suppressed_ids->data<int32_t>() : nullptr;
  const int64_t suppressed_count = options.suppressed_ids ? options.suppressed_ids->dim(0) : 0;
  // Rows are independent: dealt to the threads, each with its own scratch.
  parallel_for(rows, std::max<int64_t>(1, 16384 / vocab), [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(vocab));
    TopK best(k);
    for (int64_t r = begin; r < end; ++r) {
      select_row(logits.data<float>() + r * vocab, bias, vocab, options.normalize, suppressed, suppressed_count,
                 row.data(), best);
      for (int i = 0; i < k; ++i) {
        ids.data<int32_t>()[r * k + i] = best.id(i);
        values.data<float>()[r * k + i] = best.value(i);
      }
    }
  });
}

}  // namespace seqtrans::cpu
