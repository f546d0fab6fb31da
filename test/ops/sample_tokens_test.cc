// The sampling output layer on the CPU: its integer weights against exp, its masks and filters on rows
// worked out by hand, its log-probs against log_softmax, and its draws against the distribution that
// Hugging Face's warpers define (a chi-square test over many input lines).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "catch.h"
#include "core/sampling_math.h"
#include "ops/ops.h"
#include "support/hf_warpers.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::check_chi_square;
using seqtrans::testing::warped_distribution;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

ops::SamplingRow row_settings(int top_k, float top_p, float min_p, float temperature, uint64_t line) {
  ops::SamplingRow row;
  row.top_k = top_k;
  row.top_p = top_p;
  row.min_p = min_p;
  row.temperature = temperature;
  row.seed_low = 1234;
  row.line_low = static_cast<uint32_t>(line);
  row.line_high = static_cast<uint32_t>(line >> 32);
  return row;
}

struct Draws {
  std::vector<int32_t> ids;
  std::vector<float> log_probs;
};

// Every row of `settings` samples the same logits row [vocab].
Draws draw(const std::vector<float>& logits, const std::vector<ops::SamplingRow>& settings,
           const ops::SampleOptions& options = {}) {
  const int64_t vocab = static_cast<int64_t>(logits.size()), rows = static_cast<int64_t>(settings.size());
  std::vector<float> repeated;
  for (int64_t r = 0; r < rows; ++r) repeated.insert(repeated.end(), logits.begin(), logits.end());
  Tensor ids, log_probs;
  ops::sample_tokens(Tensor::from_floats({rows, vocab}, repeated), ops::sampling_rows_tensor(settings), options, ids,
                     log_probs);
  return {ids.to_int_vector(), log_probs.to_float_vector()};
}

std::vector<ops::SamplingRow> lines(const ops::SamplingRow& base, int count) {
  std::vector<ops::SamplingRow> rows(static_cast<size_t>(count), base);
  for (int i = 0; i < count; ++i) rows[i].line_low = static_cast<uint32_t>(i);
  return rows;
}

std::set<int32_t> distinct(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

// A fixed row: 40 logits spread over [-4, 4] with a few exact ties.
std::vector<float> spread_row() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> logits(40);
  for (float& value : logits) value = uniform(rng);
  logits[7] = logits[3];
  logits[21] = logits[3];
  return logits;
}

}  // namespace

TEST_CASE("sampling weights are exp in fixed point", "[ops][sampling]") {
  CHECK(sampling_weight(0.0f) == uint64_t{1} << kWeightBits);
  CHECK(sampling_weight(-0.0f) == uint64_t{1} << kWeightBits);
  CHECK(sampling_weight(-kInf) == 0);
  CHECK(sampling_weight(std::nanf("")) == 0);
  CHECK(sampling_weight(-30.5f) == 0);
  // Within a few float roundings of exp, plus the truncation to an integer.
  double worst = 0.0;
  for (float d = 0.0f; d > -29.0f; d -= 0.0137f) {
    const double exact = std::exp(static_cast<double>(d)) * std::ldexp(1.0, kWeightBits);
    worst = std::max(worst, (std::abs(static_cast<double>(sampling_weight(d)) - exact) - 1.0) / exact);
  }
  CHECK(worst < 3e-7);
  CHECK(min_p_weight(1.0f) == uint64_t{1} << kWeightBits);
  CHECK(min_p_weight(0.0f) == 0);
  CHECK(top_p_kept_mass(1000, 1.0f) == 1000);
  CHECK(top_p_kept_mass(1000, 0.25f) == 250);
  CHECK(draw_position(~uint64_t{0}, 10) == 9);
  CHECK(draw_position(0, 10) == 0);
}

TEST_CASE("sample_tokens is a function of the row's key", "[ops][sampling]") {
  const std::vector<float> logits = spread_row();
  const Draws first = draw(logits, lines(row_settings(0, 1.0f, 0.0f, 1.0f, 0), 200));
  const Draws again = draw(logits, lines(row_settings(0, 1.0f, 0.0f, 1.0f, 0), 200));
  CHECK(first.ids == again.ids);
  CHECK(distinct(first.ids).size() > 10);  // different lines draw differently
  // Each coordinate of the key changes the draws.
  for (const auto& change : std::vector<void (*)(ops::SamplingRow&)>{
           [](ops::SamplingRow& row) { row.seed_low += 1; }, [](ops::SamplingRow& row) { row.seed_high += 1; },
           [](ops::SamplingRow& row) { row.step += 1; }, [](ops::SamplingRow& row) { row.sample += 1; },
           [](ops::SamplingRow& row) { row.line_high += 1; }}) {
    std::vector<ops::SamplingRow> rows = lines(row_settings(0, 1.0f, 0.0f, 1.0f, 0), 200);
    for (ops::SamplingRow& row : rows) change(row);
    CHECK(draw(logits, rows).ids != first.ids);
  }
}

TEST_CASE("sample_tokens never draws masked ids, and reports log_softmax of logits plus bias", "[ops][sampling]") {
  const std::vector<float> logits = {1.0f, 3.0f, 2.5f, 0.5f, 3.0f};
  const std::vector<float> bias = {0.0f, -0.5f, 0.25f, 0.0f, 1.0f};
  const Tensor bias_tensor = Tensor::from_floats({5}, bias);
  const Tensor suppressed = Tensor::from_ints({1}, {4});
  ops::SampleOptions options;
  options.bias = &bias_tensor;
  options.suppressed_ids = &suppressed;
  ops::SamplingRow base = row_settings(0, 1.0f, 0.0f, 0.7f, 0);
  base.banned_id = 2;
  const Draws draws = draw(logits, lines(base, 500), options);
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(static_cast<double>(logits[i] + bias[i]));
  for (size_t r = 0; r < draws.ids.size(); ++r) {
    const int32_t id = draws.ids[r];
    REQUIRE((id == 0 || id == 1 || id == 3));
    // Normalized over the whole row, the masked ids included; temperature does not enter.
    CHECK(draws.log_probs[r] == Approx(std::log(std::exp(static_cast<double>(logits[id] + bias[id])) / sum)).epsilon(1e-6));
  }
  CHECK(distinct(draws.ids) == std::set<int32_t>{0, 1, 3});

  // A row with nothing left draws -1.
  const std::vector<float> masked = {-kInf, -kInf, 5.0f};
  ops::SamplingRow ban = row_settings(0, 1.0f, 0.0f, 1.0f, 0);
  ban.banned_id = 2;
  const Draws none = draw(masked, {ban});
  CHECK(none.ids[0] == -1);
  CHECK(none.log_probs[0] == -kInf);
}

TEST_CASE("sample_tokens filters: top-k keeps ties with the k-th, tiny top-p and min-p 1 keep the best", "[ops][sampling]") {
  // Ids 1 and 4 tie for the best, 2 and 5 for the third.
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, -1.0f, 2.0f, 1.0f};
  CHECK(distinct(draw(logits, lines(row_settings(1, 1.0f, 0.0f, 1.0f, 0), 300)).ids) == std::set<int32_t>{1, 4});
  CHECK(distinct(draw(logits, lines(row_settings(3, 1.0f, 0.0f, 1.0f, 0), 300)).ids) == std::set<int32_t>{1, 2, 4, 5});
  // Top-p ranks ties by id: the nucleus of a tiny p is the lowest id of the best.
  CHECK(distinct(draw(logits, lines(row_settings(0, 1e-6f, 0.0f, 1.0f, 0), 300)).ids) == std::set<int32_t>{1});
  CHECK(distinct(draw(logits, lines(row_settings(0, 1.0f, 1.0f, 1.0f, 0), 300)).ids) == std::set<int32_t>{1, 4});
  // Min-p 0.3 of e^2: e^1 / e^2 = 0.37 stays, e^0 / e^2 = 0.14 goes.
  CHECK(distinct(draw(logits, lines(row_settings(0, 1.0f, 0.3f, 1.0f, 0), 300)).ids) ==
        std::set<int32_t>{1, 2, 4, 5});
}

TEST_CASE("sample_tokens draws follow Hugging Face's warped distribution (chi-square)", "[ops][sampling]") {
  const std::vector<float> logits = spread_row();
  const std::vector<ops::SamplingRow> settings = {
      row_settings(0, 1.0f, 0.0f, 1.0f, 0),  row_settings(0, 1.0f, 0.0f, 0.6f, 0),
      row_settings(7, 1.0f, 0.0f, 1.0f, 0),  row_settings(0, 0.8f, 0.0f, 1.0f, 0),
      row_settings(0, 1.0f, 0.05f, 1.0f, 0), row_settings(12, 0.9f, 0.02f, 1.3f, 0),
  };
  for (const ops::SamplingRow& setting : settings) {
    CAPTURE(setting.top_k, setting.top_p, setting.min_p, setting.temperature);
    check_chi_square(draw(logits, lines(setting, 20000)).ids,
                     warped_distribution(logits, {setting.top_k, setting.top_p, setting.min_p, setting.temperature}));
  }
}
