// The CPU backend in batch-invariant mode: a row's products are bit for bit the same whether it is computed
// alone or among many rows, on any thread count (the scores --with-scores prints depend on it). The other
// CPU ops work row by row always; OpenBLAS's small-matrix kernel is what the mode steers clear of.
#include <cstring>
#include <vector>

#include "catch.h"
#include "core/batch_invariance.h"
#include "ops/ops.h"
#include "ops/runtime.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

const int64_t kRowCounts[] = {1, 2, 3, 7, 16, 64, 200};

bool same_rows(const Tensor& part, const Tensor& all) {
  const std::vector<float> a = part.to_float_vector(), b = all.slice_rows(0, part.dim(0)).to_float_vector();
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("CPU products give each row the same bits at any row count and thread count", "[ops][batch-invariance]") {
  const BatchInvariantScope invariant(true);
  for (const int threads : {1, 2}) {
    ops::set_cpu_threads(threads);
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{512, 512}, {2048, 512}, {512, 2048}, {58101, 512}}) {
      const Tensor a = random_floats({200, k}), b = random_floats({n, k}), bias = random_floats({n});
      ops::MatmulOptions options;
      options.bias = &bias;
      const Tensor all = ops::matmul(a, b, options);
      for (const int64_t rows : kRowCounts) {
        CAPTURE(threads, n, k, rows);
        CHECK(same_rows(ops::matmul(a.slice_rows(0, rows), b, options), all));
      }
    }
  }
  ops::set_cpu_threads(2);
}
