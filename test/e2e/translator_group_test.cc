// One engine per device (TranslatorGroup): the dealing and reordering logic runs the same on CPU engines,
// so these cases use two CPU engines on the tiny golden model and check that every line comes back once,
// in input order, with the single engine's translation; that errors on either side end the run with
// the error; and (gpu tag, two GPUs) that `--device cuda:0,1` prints what `--device cuda:0` prints.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "core/device.h"
#include "core/error.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/process.h"
#include "translator_group.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

// The golden inputs: 1 to 229 source ids, one blank line; mixed lengths finish out of order.
std::vector<Line> golden_lines(size_t count) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  std::vector<Line> lines;
  for (size_t i = 0; i < std::min(count, golden.cases.size()); ++i) lines.push_back(Line{i, golden.cases[i].source_text});
  return lines;
}

// Small batches, so that a few dozen lines make many deals.
TranslatorOptions cpu_options(int beam_size) {
  TranslatorOptions options;
  options.model_path = converted_tiny_model();
  options.device = Device::CPU;
  options.batching.max_batch_size = 4;
  options.search.beam_size = beam_size;
  options.search.num_hypotheses = beam_size > 1 ? 2 : 1;
  options.search.max_length_a = 60;
  return options;
}

// A feed handing out `lines` in windows of `window` lines.
LineFeed windows_of(const std::vector<Line>& lines, size_t window) {
  auto next = std::make_shared<size_t>(0);
  return [&lines, window, next] {
    const size_t first = *next, last = std::min(lines.size(), first + window);
    *next = last;
    return std::vector<Line>(lines.begin() + static_cast<std::ptrdiff_t>(first),
                             lines.begin() + static_cast<std::ptrdiff_t>(last));
  };
}

void check_same_translations(const std::vector<Translation>& got, const std::vector<Translation>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].texts == want[i].texts);
    REQUIRE(got[i].scores.size() == want[i].scores.size());
    // A BLAS may round a row differently for other row counts (docs: batching modes): the last digit.
    for (size_t k = 0; k < got[i].scores.size(); ++k) CHECK(std::abs(got[i].scores[k] - want[i].scores[k]) < 2e-4);
  }
}

}  // namespace

TEST_CASE("two CPU engines give every line once, in input order, with one engine's translation", "[e2e][group]") {
  const std::vector<Line> lines = golden_lines(90);
  for (const int beam : {1, 4}) {
    CAPTURE(beam);
    const std::vector<Translation> reference = TranslatorGroup(cpu_options(beam), {0}).translate(lines);
    TranslatorGroup group(cpu_options(beam), {0, 1});
    REQUIRE(group.engines() == 2);
    CHECK(group.device_indices() == std::vector<int>{0, 1});
    CHECK(group.deal_size() == 4);  // a quarter of an engine's read-ahead: four batches of 4

    std::vector<size_t> order;
    std::vector<Translation> translations;
    group.translate_stream(windows_of(lines, 7), [&](const Line& line, Translation& translation) {
      order.push_back(line.index);
      translations.push_back(translation);
    });
    std::vector<size_t> expected_order(lines.size());
    for (size_t i = 0; i < expected_order.size(); ++i) expected_order[i] = i;
    CHECK(order == expected_order);
    check_same_translations(translations, reference);

    // Both engines took part, and between them translated each line once.
    const std::vector<TranslationStats> engines = group.engine_stats();
    REQUIRE(engines.size() == 2);
    CHECK(engines[0].sentences > 0);
    CHECK(engines[1].sentences > 0);
    CHECK(group.stats().sentences == lines.size());
    // Each engine's finish time is measured from the stream's start: positive, within the stream's time.
    const std::vector<double>& done = group.last_stream_engine_seconds();
    REQUIRE(done.size() == 2);
    CHECK(done[0] > 0);
    CHECK(done[1] > 0);
    // A second call on the same group: same lines again.
    check_same_translations(group.translate(lines), reference);
  }
}

TEST_CASE("a translator group's engines follow set_search", "[e2e][group]") {
  const std::vector<Line> lines = golden_lines(30);
  TranslatorGroup group(cpu_options(4), {0, 1});
  SearchOptions greedy = cpu_options(1).search;
  group.set_search(greedy, OpenSettings{});
  check_same_translations(group.translate(lines), TranslatorGroup(cpu_options(1), {0}).translate(lines));
  CHECK(group.options().search.beam_size == 1);
}

TEST_CASE("an input error reaches the caller of a translator group, which stays usable", "[e2e][group]") {
  const std::vector<Line> lines = golden_lines(40);
  TranslatorGroup group(cpu_options(1), {0, 1});
  size_t calls = 0;
  const LineFeed failing = [&] {
    if (++calls > 2) throw Error("input.en: read error");
    return std::vector<Line>(lines.begin() + static_cast<std::ptrdiff_t>(10 * (calls - 1)),
                             lines.begin() + static_cast<std::ptrdiff_t>(10 * calls));
  };
  size_t written = 0;
  CHECK_THROWS_WITH(group.translate_stream(failing, [&](const Line&, Translation&) { ++written; }),
                    "input.en: read error");
  CHECK(written <= 20);
  CHECK(group.translate(lines).size() == lines.size());
}

TEST_CASE("an output error stops a translator group's engines and reaches the caller", "[e2e][group]") {
  const std::vector<Line> lines = golden_lines(60);
  TranslatorGroup group(cpu_options(1), {0, 1});
  size_t written = 0;
  CHECK_THROWS_WITH(group.translate_stream(windows_of(lines, 60),
                                           [&](const Line&, Translation&) {
                                             if (++written == 5) throw Error("error writing output");
                                           }),
                    "error writing output");
  CHECK(written == 5);
  const std::vector<Translation> again = group.translate(lines);
  check_same_translations(again, TranslatorGroup(cpu_options(1), {0}).translate(lines));
}

// Two GPUs: one engine each; the output must be the one-GPU output, line for line (fp32, where a batch's
// make-up does not change a token).
TEST_CASE("--device cuda:0,1 prints what --device cuda:0 prints (fp32)", "[gpu][e2e][group]") {
  REQUIRE_GPU_OR_SKIP();
  if (cuda_device_count() < 2) {
    WARN("one GPU: the two-GPU comparison is skipped");
    return;
  }
  std::string input;
  for (const Line& line : golden_lines(1000)) input += line.text + "\n";
  std::string repeated;  // enough lines for both engines to take many deals
  for (int copy = 0; copy < 10; ++copy) repeated += input;
  const auto translate = [&](const std::string& device) {
    const ProcessResult result = run_process(
        {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--quiet", "--device", device, "--precision",
         "fp32", "--max-length", "60", "--with-scores", "--max-batch-size", "16"},
        repeated, 600);
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    return split_lines(result.out);
  };
  const std::vector<std::string> one = translate("cuda:0"), two = translate("cuda:0,1");
  CHECK(one.size() == count_lines(repeated));
  REQUIRE(two.size() == one.size());
  size_t differing = 0;
  double worst_score = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    // "score ||| text": texts must match; scores to the last printed digit.
    const size_t a_bar = one[i].find(" ||| "), b_bar = two[i].find(" ||| ");
    REQUIRE(a_bar != std::string::npos);
    REQUIRE(b_bar != std::string::npos);
    if (one[i].substr(a_bar) != two[i].substr(b_bar) && ++differing <= 5)
      FAIL_CHECK("line " << i << ": cuda:0 '" << one[i] << "' vs cuda:0,1 '" << two[i] << "'");
    worst_score = std::max(worst_score, std::abs(std::stod(one[i].substr(0, a_bar)) - std::stod(two[i].substr(0, b_bar))));
  }
  CHECK(differing == 0);
  CHECK(worst_score < 2e-4);
}
