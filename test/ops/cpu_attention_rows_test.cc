// The CPU attention's AVX2 build against its portable build: the same bits, whatever the shape.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "catch.h"
#include "cpu/attention_rows.h"
#include "cpu/isa.h"
#include "support/random_tensor.h"

using namespace seqtrans;

namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

struct RowCase {
  int64_t heads, kv_heads, head_dim, query_len, key_len;
};

// Both builds on the same random row (the AVX2 one with approximate_exp as given); the number of output
// floats whose bits differ, and the largest difference.
struct Comparison {
  int64_t differing = 0;
  double largest_difference = 0.0;
};
Comparison compare_builds(const RowCase& c, bool approximate_exp) {
  const int64_t width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const int64_t key_rows = c.key_len + 5;  // keys sit at shuffled rows among a few unread ones
  const Tensor query = testing::random_floats({c.query_len, width}, -3.0f, 3.0f);
  const Tensor keys = testing::random_floats({key_rows, kv_width}, -3.0f, 3.0f);
  const Tensor values = testing::random_floats({key_rows, kv_width});
  std::vector<int64_t> order(static_cast<size_t>(key_rows));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), testing::test_rng());
  std::vector<int64_t> key_offsets(static_cast<size_t>(c.key_len)), kv_offsets(static_cast<size_t>(c.heads));
  for (int64_t j = 0; j < c.key_len; ++j) key_offsets[j] = order[j] * kv_width;
  for (int64_t h = 0; h < c.heads; ++h) kv_offsets[h] = h / (c.heads / c.kv_heads) * c.head_dim;
  std::vector<float> portable(static_cast<size_t>(c.query_len * width), -1.0f), avx2 = portable;
  std::vector<float> scores(static_cast<size_t>(c.heads * c.key_len));
  cpu::AttentionRow row;
  row.query = query.data<float>();
  row.keys = keys.data<float>();
  row.values = values.data<float>();
  row.key_offsets = key_offsets.data();
  row.kv_offsets = kv_offsets.data();
  row.query_len = c.query_len;
  row.key_len = c.key_len;
  row.heads = c.heads;
  row.head_dim = c.head_dim;
  row.scale = 0.17677669f;
  row.out = portable.data();
  cpu::attend_row_portable(row, scores.data());
  row.out = avx2.data();
  row.approximate_exp = approximate_exp;
  // The vector build on this CPU (which has AVX2: the callers check), also under SEQTRANS_CPU_ISA=portable.
  row.isa = cpu::cpu_isa() == cpu::Isa::Portable ? cpu::Isa::Avx2 : cpu::cpu_isa();
  cpu::attend_row_avx2(row, scores.data());
  Comparison result;
  for (size_t i = 0; i < portable.size(); ++i) {
    result.differing += std::memcmp(&portable[i], &avx2[i], sizeof(float)) != 0;
    result.largest_difference = std::max(result.largest_difference, double{std::abs(portable[i] - avx2[i])});
  }
  return result;
}

int64_t differing_floats(const RowCase& c) { return compare_builds(c, false).differing; }

}  // namespace

TEST_CASE("attention's AVX2 rows give the portable rows' bits (head sizes, key counts, grouped heads)", "[ops]") {
  if (!cpu_has_avx2()) {
    WARN("no AVX2 on this CPU: nothing to compare");
    return;
  }
  CHECK(!cpu::attend_row_avx2_fits(8));
  CHECK(!cpu::attend_row_avx2_fits(24));
  for (int64_t head_dim : {16, 32, 48, 64, 80, 128, 144})
    for (int64_t key_len : {0, 1, 3, 7, 8, 9, 16, 23, 40, 77}) {
      REQUIRE(cpu::attend_row_avx2_fits(head_dim));
      for (const RowCase c : {RowCase{8, 8, head_dim, 1, key_len}, RowCase{4, 2, head_dim, 3, key_len},
                              RowCase{3, 1, head_dim, 2, key_len}}) {
        INFO("heads " << c.heads << " kv heads " << c.kv_heads << " head_dim " << c.head_dim << " queries "
                      << c.query_len << " keys " << c.key_len);
        CHECK(differing_floats(c) == 0);
      }
    }
}

TEST_CASE("attention with approximate_exp stays within 1e-6 of the exact softmax's output", "[ops]") {
  if (!cpu_has_avx2()) return;
  int64_t differing = 0;
  for (int64_t head_dim : {16, 64})
    for (int64_t key_len : {1, 9, 40, 77}) {
      const Comparison comparison = compare_builds(RowCase{4, 4, head_dim, 2, key_len}, true);
      INFO("head_dim " << head_dim << " keys " << key_len);
      // Values in [-1, 1]: the output is their weighted mean, its weights each within ~3e-7 relative.
      CHECK(comparison.largest_difference < 1e-6);
      differing += comparison.differing;
    }
  CHECK(differing > 0);  // it is another computation: some bits differ
}
