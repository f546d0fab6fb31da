// The sampling output layer on the GPU against the CPU op, on fresh random rows: the same token on every
// row (the arithmetic is shared, core/sampling_math.h) and the same log-prob to fp32 rounding, across
// filters, ties, masks, vocabulary sizes and per-row settings.
#include "catch.h"

#ifdef SEQTRANS_WITH_CUDA

#include <cmath>
#include <limits>
#include <random>

#include "core/device.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::test_rng;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// How logits are drawn: continuous, a few values shared by many tokens (ties at every cut), half -inf,
// all equal, or a peaked row (one token far ahead: top-p keeps a handful).
enum class Pattern { Uniform, Ties, SparseInf, Flat, Peaked };

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::Uniform: return "uniform";
    case Pattern::Ties: return "ties";
    case Pattern::SparseInf: return "sparse -inf";
    case Pattern::Flat: return "flat";
    case Pattern::Peaked: return "peaked";
  }
  return "?";
}

std::vector<float> make_logits(int64_t rows, int64_t vocab, Pattern pattern) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  std::uniform_int_distribution<int> small(-4, 2);
  std::uniform_int_distribution<int> coin(0, 99);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      float& x = logits[r * vocab + i];
      switch (pattern) {
        case Pattern::Uniform: x = uniform(test_rng()); break;
        case Pattern::Ties: x = static_cast<float>(small(test_rng())) * 0.75f; break;
        case Pattern::SparseInf: x = coin(test_rng()) < 50 ? -kInf : uniform(test_rng()); break;
        case Pattern::Flat: x = 1.5f; break;
        case Pattern::Peaked: x = i == r % vocab ? 12.0f : uniform(test_rng()) * 0.25f; break;
      }
    }
  return logits;
}

// Per-row settings drawn from the combinations that matter: each filter alone, all together, extremes.
ops::SamplingRow random_settings(int64_t row, int64_t vocab) {
  std::uniform_int_distribution<int> pick(0, 7);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  ops::SamplingRow settings;
  settings.seed_low = static_cast<uint32_t>(test_rng()());
  settings.seed_high = static_cast<uint32_t>(test_rng()());
  settings.line_low = static_cast<uint32_t>(row * 7919);
  settings.step = static_cast<uint32_t>(test_rng()() % 300);
  settings.sample = static_cast<uint32_t>(row % 3);
  switch (pick(test_rng())) {
    case 0: break;  // plain sampling
    case 1: settings.top_k = 1 + static_cast<int32_t>(test_rng()() % 64); break;
    case 2: settings.top_p = 0.05f + 0.9f * unit(test_rng()); break;
    case 3: settings.min_p = 0.3f * unit(test_rng()); break;
    case 4:
      settings.top_k = 1 + static_cast<int32_t>(test_rng()() % static_cast<uint32_t>(vocab));
      settings.top_p = 0.05f + 0.95f * unit(test_rng());
      settings.min_p = 0.1f * unit(test_rng());
      settings.temperature = 0.3f + 1.5f * unit(test_rng());
      break;
    case 5: settings.temperature = 0.25f + 2.0f * unit(test_rng()); break;
    case 6: settings.top_p = 1e-6f; break;  // the best only
    case 7: settings.top_k = static_cast<int32_t>(vocab + 3); break;  // larger than the vocabulary
  }
  if (test_rng()() % 4 == 0) settings.banned_id = static_cast<int32_t>(test_rng()() % static_cast<uint32_t>(vocab));
  return settings;
}

struct SampleCase {
  int64_t rows, vocab;
  Pattern pattern;
  bool bias;
  bool suppress;
};

void check_case(const SampleCase& c) {
  CAPTURE(c.rows, c.vocab, pattern_name(c.pattern), c.bias, c.suppress);
  const Tensor logits = Tensor::from_floats({c.rows, c.vocab}, make_logits(c.rows, c.vocab, c.pattern));
  std::vector<ops::SamplingRow> settings;
  for (int64_t r = 0; r < c.rows; ++r) settings.push_back(random_settings(r, c.vocab));
  const Tensor rows = ops::sampling_rows_tensor(settings);
  const Tensor bias = testing::random_floats({c.vocab}, -2.0f, 2.0f);
  std::vector<int32_t> suppressed_ids;
  for (int i = 0; i < 20; ++i) suppressed_ids.push_back(static_cast<int32_t>(test_rng()() % c.vocab));
  const Tensor suppressed = Tensor::from_ints({static_cast<int64_t>(suppressed_ids.size())}, suppressed_ids);

  ops::SampleOptions host_options;
  host_options.bias = c.bias ? &bias : nullptr;
  host_options.suppressed_ids = c.suppress ? &suppressed : nullptr;
  Tensor host_ids, host_log_probs;
  ops::sample_tokens(logits, rows, host_options, host_ids, host_log_probs);

  const Tensor device_bias = bias.to(Device::CUDA), device_suppressed = suppressed.to(Device::CUDA);
  ops::SampleOptions device_options;
  device_options.bias = c.bias ? &device_bias : nullptr;
  device_options.suppressed_ids = c.suppress ? &device_suppressed : nullptr;
  Tensor device_ids, device_log_probs;
  ops::sample_tokens(logits.to(Device::CUDA), rows.to(Device::CUDA), device_options, device_ids, device_log_probs);

  const std::vector<int32_t> want_ids = host_ids.to_int_vector(), got_ids = device_ids.to_int_vector();
  const std::vector<float> want = host_log_probs.to_float_vector(), got = device_log_probs.to_float_vector();
  if (c.suppress) {  // the bitmap made once draws as the one a launch builds
    const Tensor bitmap = ops::suppression_bitmap(device_suppressed, c.vocab);
    device_options.suppressed_bitmap = &bitmap;
    Tensor again_ids, again_log_probs;
    ops::sample_tokens(logits.to(Device::CUDA), rows.to(Device::CUDA), device_options, again_ids, again_log_probs);
    CHECK(again_ids.to_int_vector() == got_ids);
    CHECK(again_log_probs.to_float_vector() == got);
  }
  for (int64_t r = 0; r < c.rows; ++r) {
    CAPTURE(r, settings[r].top_k, settings[r].top_p, settings[r].min_p, settings[r].temperature, settings[r].banned_id);
    REQUIRE(got_ids[r] == want_ids[r]);
    if (want[r] == -kInf) {
      CHECK(got[r] == -kInf);
    } else {
      CHECK(std::abs(got[r] - want[r]) <= 1e-5f * std::max(1.0f, std::abs(want[r])));
    }
  }
}

}  // namespace

TEST_CASE("cuda sample_tokens draws the CPU's tokens", "[gpu][sampling]") {
  REQUIRE_GPU_OR_SKIP();
  for (Pattern pattern : {Pattern::Uniform, Pattern::Ties, Pattern::SparseInf, Pattern::Flat, Pattern::Peaked})
    for (int64_t vocab : {int64_t{3}, int64_t{1237}, int64_t{32000}, int64_t{58101}})
      for (bool bias : {false, true}) check_case({64, vocab, pattern, bias, /*suppress=*/vocab > 3});
}

TEST_CASE("cuda sample_tokens agrees on single rows and on large batches", "[gpu][sampling]") {
  REQUIRE_GPU_OR_SKIP();
  check_case({1, 58101, Pattern::Uniform, true, true});
  check_case({512, 8000, Pattern::Ties, true, true});
}

#endif  // SEQTRANS_WITH_CUDA
