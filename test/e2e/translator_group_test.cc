// One engine per device (TranslatorGroup): the dealing and reordering logic runs the same on CPU engines,
// so these cases use two CPU engines on the tiny golden model and check that every line comes back once,
// in input order, with the single engine's translation; that errors on either side end the run with
// the error; and (gpu tag, two GPUs) that `--device cuda:0,1` prints what `--device cuda:0` prints.
#include <cmath>
#include <fstream>
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

namespace {

// True with two GPUs or more; otherwise says why the case is skipped.
bool two_gpus_or_warn() {
  if (cuda_device_count() >= 2) return true;
  WARN("one GPU: the two-GPU case is skipped (it needs cuda:0 and cuda:1)");
  return false;
}

// `translate --with-scores` of `input` on `device` in fp32, with `settings` added; one entry per output line.
std::vector<std::string> translate_fp32(const std::string& device, const std::string& input,
                                        const std::vector<std::string>& settings) {
  std::vector<std::string> arguments{seqtrans_binary(), "translate", "-m",        converted_tiny_model(), "--quiet",
                                     "--device",        device,      "--precision", "fp32",  "--max-length", "60",
                                     "--with-scores"};
  arguments.insert(arguments.end(), settings.begin(), settings.end());
  const ProcessResult result = run_process(arguments, input, 600);
  INFO(device << ": " << result.err);
  REQUIRE(result.exit_code == 0);
  return split_lines(result.out);
}

// "score ||| text" lines of two runs: texts equal, scores to the last printed digit.
void check_same_scored_lines(const std::vector<std::string>& one, const std::vector<std::string>& two) {
  REQUIRE(two.size() == one.size());
  size_t differing = 0;
  double worst_score = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    const size_t a_bar = one[i].find(" ||| "), b_bar = two[i].find(" ||| ");
    REQUIRE(a_bar != std::string::npos);
    REQUIRE(b_bar != std::string::npos);
    if (one[i].substr(a_bar) != two[i].substr(b_bar) && ++differing <= 5)
      FAIL_CHECK("line " << i << ": one GPU '" << one[i] << "' vs two GPUs '" << two[i] << "'");
    worst_score = std::max(worst_score, std::abs(std::stod(one[i].substr(0, a_bar)) - std::stod(two[i].substr(0, b_bar))));
  }
  CHECK(differing == 0);
  CHECK(worst_score < 2e-4);
}

std::string golden_input(size_t count, int copies) {
  std::string input;
  for (const Line& line : golden_lines(count)) input += line.text + "\n";
  std::string repeated;
  for (int copy = 0; copy < copies; ++copy) repeated += input;
  return repeated;
}

}  // namespace

// Two GPUs: one engine each; the output must be the one-GPU output, line for line (fp32, where a batch's
// make-up does not change a token).
TEST_CASE("--device cuda:0,1 prints what --device cuda:0 prints (fp32)", "[gpu][e2e][group]") {
  REQUIRE_GPU_OR_SKIP();
  if (!two_gpus_or_warn()) return;
  const std::string repeated = golden_input(1000, 10);  // enough lines for both engines to take many deals
  const std::vector<std::string> settings{"--max-batch-size", "16"};
  const std::vector<std::string> one = translate_fp32("cuda:0", repeated, settings);
  CHECK(one.size() == count_lines(repeated));
  check_same_scored_lines(one, translate_fp32("cuda:0,1", repeated, settings));
}

// One sentence at a time, greedy: every step has one or two rows, so each GPU runs the persistent decoder
// kernel (its launch once failed on the second GPU: its shared-memory attribute had been set on the first
// only); and beam 4 at the default budget.
TEST_CASE("two GPUs one sentence at a time (greedy) and beam 4 print what one GPU prints (fp32)", "[gpu][e2e][group]") {
  REQUIRE_GPU_OR_SKIP();
  if (!two_gpus_or_warn()) return;
  const std::string input = golden_input(200, 1);
  for (const std::vector<std::string>& settings :
       {std::vector<std::string>{"-b", "1", "--max-batch-size", "1"}, std::vector<std::string>{"-b", "4"}}) {
    CAPTURE(settings);
    const std::vector<std::string> one = translate_fp32("cuda:0", input, settings);
    CHECK(one.size() == count_lines(input));
    check_same_scored_lines(one, translate_fp32("cuda:0,1", input, settings));
  }
  // The same in fp16 (the default), where only the run's success and line count are checked.
  const ProcessResult fp16 = run_process({seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--quiet",
                                          "--device", "cuda:0,1", "-b", "1", "--max-batch-size", "1"},
                                         input, 600);
  INFO(fp16.err);
  CHECK(fp16.exit_code == 0);
  CHECK(count_lines(fp16.out) == count_lines(input));
}

TEST_CASE("bench -i on two GPUs prints its report", "[gpu][e2e][group]") {
  REQUIRE_GPU_OR_SKIP();
  if (!two_gpus_or_warn()) return;
  const std::string path = std::string(SEQTRANS_BINARY_DIR) + "/two_gpu_bench_input.txt";
  {
    std::ofstream file(path);
    file << golden_input(1000, 2);
  }
  const ProcessResult result = run_process({seqtrans_binary(), "bench", "-m", converted_tiny_model(), "--device",
                                            "cuda:0,1", "-i", path, "--runs", "1", "--warmup", "0", "-b", "1"},
                                           "", 600);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::string report = result.out + result.err;
  CHECK(report.find("engines") != std::string::npos);
  CHECK(report.find("target tokens/s") != std::string::npos);
}
