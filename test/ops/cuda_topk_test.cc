// The fused output layer (log_softmax_topk) against a full sort on the host: the k best must match
// exactly, ties (lower index first), -inf entries and suppressed ids included.
#include "catch.h"

#ifdef SEQTRANS_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/device.h"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/context.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::test_rng;


namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct TopkReference {
  std::vector<float> values;     // [rows, k]
  std::vector<int32_t> indices;  // [rows, k]
};

// The host twin: z = logit + bias in fp32 (as the kernel adds them), log-sum-exp in double, suppressed
// ids set to -inf after normalization, then a full stable sort by value (descending) and index.
TopkReference reference_topk(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                             const std::vector<float>* bias, const std::vector<int32_t>& suppressed, int k) {
  std::vector<char> is_suppressed(static_cast<size_t>(vocab), 0);
  for (int32_t id : suppressed)
    if (id >= 0 && id < vocab) is_suppressed[static_cast<size_t>(id)] = 1;
  TopkReference result;
  std::vector<float> z(static_cast<size_t>(vocab));
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    double max = -kInf;
    for (int64_t i = 0; i < vocab; ++i) {
      z[i] = logits[r * vocab + i] + (bias ? (*bias)[i] : 0.0f);
      max = std::max<double>(max, z[i]);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i)
      if (z[i] != -kInf) sum += std::exp(z[i] - max);
    const double log_sum_exp = max == -kInf ? -kInf : max + std::log(sum);
    for (int64_t i = 0; i < vocab; ++i)
      if (is_suppressed[i]) z[i] = -kInf;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
    for (int i = 0; i < k; ++i) {
      const float value = z[order[i]];
      result.values.push_back(value == -kInf ? -kInf : static_cast<float>(value - log_sum_exp));
      result.indices.push_back(order[i]);
    }
  }
  return result;
}

// How logits are drawn: continuous, heavily tied, or with -inf masks.
enum class Pattern { Uniform, Ties, SparseInf, MostlyInf, AllInf };

std::vector<float> make_logits(int64_t rows, int64_t vocab, Pattern pattern) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_int_distribution<int> coin(0, 99);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      float& x = logits[r * vocab + i];
      switch (pattern) {
        case Pattern::Uniform: x = uniform(test_rng()); break;
        case Pattern::Ties: x = static_cast<float>(small(test_rng())) * 0.5f; break;
        case Pattern::SparseInf: x = coin(test_rng()) < 50 ? -kInf : uniform(test_rng()); break;
        case Pattern::MostlyInf: x = coin(test_rng()) < 1 || i == 3 ? uniform(test_rng()) : -kInf; break;
        case Pattern::AllInf: x = -kInf; break;
      }
    }
  return logits;
}

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::Uniform: return "uniform";
    case Pattern::Ties: return "ties";
    case Pattern::SparseInf: return "sparse -inf";
    case Pattern::MostlyInf: return "mostly -inf";
    case Pattern::AllInf: return "all -inf";
  }
  return "?";
}

const char* algorithm_name(ops::TopkAlgorithm algorithm) {
  switch (algorithm) {
    case ops::TopkAlgorithm::Auto: return "auto";
    case ops::TopkAlgorithm::FullScan: return "radix";
    case ops::TopkAlgorithm::Hierarchical: return "group";
  }
  return "?";
}

enum class BiasKind { None, Same, F32 };

struct TopkCase {
  int64_t rows, vocab;
  int k;
  DataType dtype;
  BiasKind bias;
  Pattern pattern;
  bool suppress;
  ops::TopkAlgorithm algorithm;
  bool misaligned = false;  // the logits one element past a vector boundary: scalar loads throughout
};

// The logits on the device: their own allocation, or a view one element into a larger one.
Tensor device_logits(const Tensor& logits, bool misaligned) {
  if (!misaligned) return logits.to(Device::CUDA);
  const int64_t elements = logits.elements();
  Tensor buffer({elements + 1}, logits.dtype(), Device::CUDA);
  Tensor view = buffer.slice_rows(1, elements + 1).reshape(logits.shape());
  view.copy_from(logits);
  return view;
}

// Runs one case on the GPU and compares with the host twin; the inputs the GPU sees (fp16-rounded when
// the logits are fp16) are the inputs the reference sees.
void check_case(const TopkCase& c) {
  CAPTURE(c.rows, c.vocab, c.k, dtype_name(c.dtype), static_cast<int>(c.bias), pattern_name(c.pattern), c.suppress,
          algorithm_name(c.algorithm), c.misaligned);
  Tensor logits = Tensor::from_floats({c.rows, c.vocab}, make_logits(c.rows, c.vocab, c.pattern));
  if (c.dtype == DataType::F16) logits = logits.to(DataType::F16);
  std::vector<float> logit_values = logits.to_float_vector();

  Tensor bias;
  std::vector<float> bias_values;
  if (c.bias != BiasKind::None) {
    bias = testing::random_floats({c.vocab}, -2.0f, 2.0f);
    if (c.bias == BiasKind::Same && c.dtype == DataType::F16) bias = bias.to(DataType::F16);
    bias_values = bias.to_float_vector();
    bias = bias.to(Device::CUDA);
  }
  std::vector<int32_t> suppressed;
  if (c.suppress) {
    std::uniform_int_distribution<int32_t> id(-5, static_cast<int32_t>(c.vocab + 5));  // some out of range
    for (int i = 0; i < 40; ++i) suppressed.push_back(id(test_rng()));
    suppressed.push_back(0);
    suppressed.push_back(0);  // duplicates are fine
  }
  const Tensor suppressed_tensor =
      suppressed.empty() ? Tensor() : Tensor::from_ints({static_cast<int64_t>(suppressed.size())}, suppressed);
  const Tensor suppressed_gpu = suppressed.empty() ? Tensor() : suppressed_tensor.to(Device::CUDA);

  ops::TopkOptions options;
  options.k = c.k;
  options.bias = c.bias == BiasKind::None ? nullptr : &bias;
  options.suppressed_ids = suppressed.empty() ? nullptr : &suppressed_gpu;
  options.algorithm = c.algorithm;
  const Tensor logits_gpu = device_logits(logits, c.misaligned);
  Tensor values({c.rows, c.k}, DataType::F32, Device::CUDA);
  Tensor indices({c.rows, c.k}, DataType::I32, Device::CUDA);
  cuda::log_softmax_topk(logits_gpu, options, values, indices, cuda::current_stream());
  cuda::synchronize();

  const TopkReference expected =
      reference_topk(logit_values, c.rows, c.vocab, bias_values.empty() ? nullptr : &bias_values, suppressed, c.k);
  const std::vector<int32_t> got_indices = indices.to_int_vector();
  const std::vector<float> got_values = values.to_float_vector();
  int index_mismatches = 0, value_mismatches = 0;
  for (size_t i = 0; i < expected.indices.size(); ++i) {
    if (got_indices[i] != expected.indices[i]) ++index_mismatches;
    const float want = expected.values[i], have = got_values[i];
    const bool same = want == -kInf ? have == -kInf : std::abs(have - want) <= 1e-4 * std::max(1.0f, std::abs(want));
    if (!same) ++value_mismatches;
  }
  CHECK(index_mismatches == 0);
  CHECK(value_mismatches == 0);

  // The bitmap made once (ops::suppression_bitmap) reads as the one a launch builds from the ids.
  if (suppressed.empty()) return;
  const Tensor bitmap = ops::suppression_bitmap(suppressed_gpu, c.vocab);
  options.suppressed_bitmap = &bitmap;
  Tensor values_again({c.rows, c.k}, DataType::F32, Device::CUDA);
  Tensor indices_again({c.rows, c.k}, DataType::I32, Device::CUDA);
  cuda::log_softmax_topk(logits_gpu, options, values_again, indices_again, cuda::current_stream());
  CHECK(indices_again.to_int_vector() == got_indices);
  CHECK(values_again.to_float_vector() == got_values);
}

}  // namespace

TEST_CASE("cuda log_softmax_topk equals a full sort for every k and algorithm", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  for (DataType dtype : {DataType::F32, DataType::F16})
    for (int k : {1, 2, 5, 10, 17, 32, 64})
      for (A algorithm : {A::FullScan, A::Hierarchical, A::Auto})
        check_case({16, 32000, k, dtype, BiasKind::Same, Pattern::Uniform, false, algorithm});
}

TEST_CASE("cuda log_softmax_topk handles ties, -inf rows and suppressed ids", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  for (Pattern pattern : {Pattern::Ties, Pattern::SparseInf, Pattern::MostlyInf, Pattern::AllInf})
    for (int k : {1, 3, 10, 64})
      for (A algorithm : {A::FullScan, A::Hierarchical})
        for (bool suppress : {false, true}) {
          check_case({8, 32000, k, DataType::F32, BiasKind::None, pattern, suppress, algorithm});
          check_case({8, 32000, k, DataType::F16, BiasKind::F32, pattern, suppress, algorithm});
        }
}

TEST_CASE("cuda log_softmax_topk handles odd and large vocabularies", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  const int64_t vocabularies[] = {7, 50, 999, 32001, 58101, 250000};
  for (int64_t vocab : vocabularies)
    for (int k : {1, 4, 7, 64}) {
      if (k > vocab) continue;
      for (DataType dtype : {DataType::F32, DataType::F16}) {
        for (A algorithm : {A::FullScan, A::Auto})
          check_case({5, vocab, k, dtype, BiasKind::None, Pattern::Uniform, true, algorithm});
        check_case({5, vocab, k, dtype, BiasKind::Same, Pattern::Ties, false, A::Auto});
      }
    }
}

// Vocabularies that are not a multiple of the vector width (4 fp32, 8 fp16; 128,112 is, for comparison):
// over 9 rows, rows start at every offset the vocabulary makes (all eight for an odd one) and are read as a
// partial first vector, aligned vectors and a partial last one. The bias, aligned at id 0, is read by
// elements in the shifted rows (an fp16 one in the next test). Few rows: pass 1 split over blocks.
TEST_CASE("cuda log_softmax_topk loads rows that start mid-vector", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  struct Extras {
    BiasKind bias;
    bool suppress;
  };
  const int64_t vocabularies[] = {32001, 50265, 128112, 250054, 256206};
  const Extras extras_kinds[] = {{BiasKind::None, false}, {BiasKind::F32, true}};
  for (int64_t vocab : vocabularies)
    for (DataType dtype : {DataType::F32, DataType::F16})
      for (const Extras& extras : extras_kinds)
        for (int k : {1, 4, 8})
          for (A algorithm : {A::Hierarchical, A::FullScan}) {
            if (k == 1 && algorithm == A::FullScan) continue;  // k = 1 is one argmax whatever the algorithm
            check_case({9, vocab, k, dtype, extras.bias, Pattern::Uniform, extras.suppress, algorithm});
          }
}

// Ties and -inf across a row's partial first and last vectors: the lower id still wins.
TEST_CASE("cuda log_softmax_topk breaks ties to the lower id in rows that start mid-vector", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  for (int64_t vocab : {int64_t{32001}, int64_t{256206}})
    for (Pattern pattern : {Pattern::Ties, Pattern::MostlyInf, Pattern::AllInf})
      for (DataType dtype : {DataType::F32, DataType::F16})
        for (int k : {1, 8})
          for (A algorithm : {A::Hierarchical, A::FullScan})
            check_case({9, vocab, k, dtype, BiasKind::Same, pattern, true, algorithm});
}

// One block per row (300 rows fill the GPU), NLLB's beam-search shape among them; the group filter past
// the 48 KB of shared memory a launch gets unasked (scalar loads at NLLB's vocabulary: 8,007 groups of 32;
// vectorized loads at 500,001 ids: 7,813 of 64).
TEST_CASE("cuda log_softmax_topk at NLLB's vocabulary and beyond", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  for (DataType dtype : {DataType::F32, DataType::F16})
    for (int k : {1, 8}) {
      check_case({300, 50265, k, dtype, BiasKind::Same, Pattern::Uniform, true, A::Auto});
      check_case({9, 256206, k, dtype, BiasKind::None, Pattern::Uniform, true, A::Hierarchical, true});
      check_case({3, 500001, k, dtype, BiasKind::F32, Pattern::Uniform, true, A::Auto});
    }
  check_case({300, 256206, 8, DataType::F16, BiasKind::None, Pattern::Uniform, true, A::Auto});
}

TEST_CASE("cuda log_softmax_topk covers many rows", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (int k : {1, 10})
    check_case({512, 32000, k, DataType::F16, BiasKind::Same, Pattern::Uniform, true, ops::TopkAlgorithm::Auto});
}

// Few rows split each row across blocks for k = 1 (a chunk kernel and a merge kernel).
TEST_CASE("cuda log_softmax_topk argmax over few rows equals a full sort", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (int64_t rows : {1, 2, 3, 40, 128, 300})
    for (DataType dtype : {DataType::F32, DataType::F16})
      for (Pattern pattern : {Pattern::Uniform, Pattern::Ties, Pattern::MostlyInf})
        check_case({rows, 32000, 1, dtype, BiasKind::Same, pattern, true, ops::TopkAlgorithm::Auto});
}

// Few rows with k > 1 (beam search over one to a few sentences) and many: both filters, ties and -inf.
TEST_CASE("cuda log_softmax_topk over few rows equals a full sort", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using A = ops::TopkAlgorithm;
  for (int64_t rows : {1, 2, 3, 4, 40, 300})
    for (int k : {2, 8, 64})
      for (Pattern pattern : {Pattern::Uniform, Pattern::Ties, Pattern::MostlyInf, Pattern::AllInf}) {
        check_case({rows, 32000, k, DataType::F16, BiasKind::Same, pattern, true, A::Auto});
        check_case({rows, 32000, k, DataType::F32, BiasKind::None, pattern, false, A::FullScan});
        check_case({rows, 32001, k, DataType::F32, BiasKind::F32, pattern, true, A::Hierarchical});
      }
}

TEST_CASE("cuda log_softmax_topk refuses a suppression bitmap of another vocabulary", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const Tensor logits = testing::random_floats({2, 100}).to(Device::CUDA);
  const Tensor ids = Tensor::from_ints({2}, {3, 7}).to(Device::CUDA);
  const Tensor bitmap = ops::suppression_bitmap(ids, 1000);
  CHECK(bitmap.elements() == 32);
  CHECK(ops::suppression_bitmap(ids.to(Device::CPU), 1000).defined() == false);  // the CPU reads the ids
  ops::TopkOptions options;
  options.k = 2;
  options.suppressed_ids = &ids;
  options.suppressed_bitmap = &bitmap;
  Tensor values({2, 2}, DataType::F32, Device::CUDA), indices({2, 2}, DataType::I32, Device::CUDA);
  CHECK_THROWS_AS(cuda::log_softmax_topk(logits, options, values, indices, cuda::current_stream()), Error);
}

TEST_CASE("cuda log_softmax_topk rejects bad arguments", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const Tensor logits = testing::random_floats({2, 10}).to(Device::CUDA);
  Tensor values({2, 65}, DataType::F32, Device::CUDA), indices({2, 65}, DataType::I32, Device::CUDA);
  ops::TopkOptions options;
  options.k = 65;
  CHECK_THROWS_AS(cuda::log_softmax_topk(logits, options, values, indices, cuda::current_stream()), Error);
  options.k = 11;
  CHECK_THROWS_AS(cuda::log_softmax_topk(logits, options, values, indices, cuda::current_stream()), Error);
}

#endif
