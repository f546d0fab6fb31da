// Parity with a peer: seqtrans's CPU engine against Hugging Face generate() on the same checkpoint,
// converted here with scripts/convert_marian.py. Goldens: test/data/golden (scripts/make_golden.py).
#include <cmath>
#include <functional>
#include <iostream>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/model_builder.h"
#include "support/search_runs.h"
#include "text/sentencepiece_tokenizer.h"
#include "translator.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

struct ParityReport {
  size_t identical = 0;
  size_t total = 0;
  size_t at_limit = 0;  // golden outputs that used every allowed position
  double max_score_difference = 0.0;
};

// Golden sets whose outputs mostly reach a small limit (max_new_tokens 12), with and without HF's forced
// EOS, on both golden checkpoints, and the second checkpoint's 80-token sets (its generation config
// forces EOS). Every line must match.
const char* const kLimitGoldens[] = {
    "marian_tiny_greedy_limit12.tsv",        "marian_tiny_beam4_limit12.tsv",
    "marian_tiny_greedy_limit12_forced.tsv", "marian_tiny_beam4_limit12_forced.tsv",
    "marian_separate_greedy.tsv",            "marian_separate_beam4.tsv",
    "marian_separate_greedy_limit12.tsv",    "marian_separate_beam4_limit12.tsv",
    "marian_separate_greedy_limit12_forced.tsv", "marian_separate_beam4_limit12_forced.tsv",
};

// The target prefix ids of every golden line: none, or the golden's `target_prefixes` (comma-separated
// texts, line i taking text i modulo their number; an empty text is none), as make_golden.py gave them to
// generate() as decoder_input_ids.
std::vector<std::vector<int32_t>> golden_prefixes(const GoldenFile& golden, const ModelFile& file) {
  const auto found = golden.settings.find("target_prefixes");
  if (found == golden.settings.end() || found->second == "none") return {};
  // A plain split: "Ein,Die," is three texts, the last one empty (that line has no prefix).
  std::vector<std::string> texts(1);
  for (char c : found->second) {
    if (c == ',')
      texts.emplace_back();
    else
      texts.back() += c;
  }
  const SentencePieceTokenizer tokenizer(tokenizer_spec(file));
  std::vector<std::vector<int32_t>> prefixes;
  for (size_t i = 0; i < golden.cases.size(); ++i) prefixes.push_back(tokenizer.encode_target_prefix(texts[i % texts.size()]));
  return prefixes;
}

// The converted golden checkpoint named by the golden's `model` setting.
const std::string& golden_model(const GoldenFile& golden) {
  const auto found = golden.settings.find("model");
  if (found == golden.settings.end()) throw Error("golden settings lack model");
  return converted_golden_model(found->second);
}

// Runs the goldens through search in mini-batches of `batch_size` (batching must not change results).
// `adjust` may change the options read from the golden (to show that a test can fail).
ParityReport check_parity(const std::string& golden_name, Device device, DataType dtype, size_t batch_size,
                          const std::function<void(SearchOptions&)>& adjust = {}) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/" + golden_name);
  REQUIRE(golden.cases.size() >= 300);
  const ModelFile file = ModelFile::open(golden_model(golden));
  EncoderDecoderModel model(file, {device, dtype});
  SearchOptions options = golden_search_options(golden);
  if (options.force_eos_at_max_length)
    REQUIRE(golden.settings.at("forced_eos_token_id") == std::to_string(file.config().eos_id));
  if (adjust) adjust(options);
  const std::vector<std::vector<int32_t>> all_prefixes = golden_prefixes(golden, file);
  ParityReport report;
  for (size_t begin = 0; begin < golden.cases.size(); begin += batch_size) {
    std::vector<std::vector<int32_t>> sources, prefixes;
    std::vector<uint64_t> streams;
    const size_t end = std::min(golden.cases.size(), begin + batch_size);
    for (size_t i = begin; i < end; ++i) {
      sources.push_back(golden.cases[i].source_ids);
      streams.push_back(i);
      if (!all_prefixes.empty()) prefixes.push_back(all_prefixes[i]);
    }
    const std::vector<SearchResult> results = search_with_streams(model, sources, options, streams, prefixes);
    for (size_t i = begin; i < end; ++i) {
      const GoldenCase& expected = golden.cases[i];
      const Hypothesis& best = results[i - begin].hypotheses.at(0);
      ++report.total;
      report.at_limit +=
          static_cast<int>(expected.output_ids.size()) + (expected.finished ? 1 : 0) >= options.max_length_a;
      if (best.tokens != expected.output_ids) continue;
      ++report.identical;
      if (std::isnan(expected.score)) continue;  // HF reports no score there (make_golden.py)
      report.max_score_difference =
          std::max(report.max_score_difference, std::abs(static_cast<double>(best.score) - expected.score));
    }
  }
  std::cout << fmt::format(
      "parity {} on {} {}: {}/{} identical ({:.1f}%), max score difference {:.2e}, {} golden lines at the limit\n",
      golden_name, device_name(device), dtype_name(dtype), report.identical, report.total,
      100.0 * report.identical / report.total, report.max_score_difference, report.at_limit);
  return report;
}

// Every line of every limit golden, in fp32 on `device`.
void check_limit_goldens(Device device) {
  for (const char* golden : kLimitGoldens) {
    INFO(golden);
    const ParityReport report = check_parity(golden, device, DataType::F32, 16);
    CHECK(report.identical == report.total);
    CHECK(report.max_score_difference <= 1e-3);
  }
}

}  // namespace

// The goldens were made in fp32 on the CPU (test/data/golden/README.md), and the CPU engine matches every
// line, as on the limit goldens. (The GPU fp32 case below allows 1%: its sums run in another order.)
TEST_CASE("CPU greedy matches Hugging Face generate() on the tiny Marian model", "[e2e][parity]") {
  const ParityReport report = check_parity("marian_tiny_greedy.tsv", Device::CPU, DataType::F32, 16);
  CHECK(report.identical == report.total);
  CHECK(report.max_score_difference <= 1e-3);
}

TEST_CASE("CPU beam search (4) matches Hugging Face generate() on the tiny Marian model", "[e2e][parity]") {
  const ParityReport report = check_parity("marian_tiny_beam4.tsv", Device::CPU, DataType::F32, 16);
  CHECK(report.identical == report.total);
  CHECK(report.max_score_difference <= 1e-3);
}

TEST_CASE("CPU search matches Hugging Face generate() on every line at the length limit", "[e2e][parity]") {
  check_limit_goldens(Device::CPU);
}

// HF's repetition_penalty and no_repeat_ngram_size, and target prefixes as decoder_input_ids
// (make_golden.py's *_repetition and *_prefix sets).
constexpr const char* kControlGoldens[] = {"marian_tiny_greedy_repetition.tsv", "marian_tiny_beam4_repetition.tsv",
                                           "marian_tiny_greedy_prefix.tsv", "marian_tiny_beam4_prefix.tsv"};

TEST_CASE("CPU search matches Hugging Face generate() with repetition controls and target prefixes",
          "[e2e][parity]") {
  for (const char* golden : kControlGoldens) {
    INFO(golden);
    const ParityReport report = check_parity(golden, Device::CPU, DataType::F32, 16);
    CHECK(report.identical == report.total);
    CHECK(report.max_score_difference <= 1e-3);
  }
}

TEST_CASE("the limit goldens reach the limit, and fail without the forced EOS they were made with",
          "[e2e][parity]") {
  for (const char* golden : {"marian_tiny_greedy_limit12_forced.tsv", "marian_separate_beam4_limit12_forced.tsv"}) {
    INFO(golden);
    const ParityReport exact = check_parity(golden, Device::CPU, DataType::F32, 16);
    CHECK(exact.at_limit >= exact.total / 2);
    const ParityReport unforced =
        check_parity(golden, Device::CPU, DataType::F32, 16, [](SearchOptions& options) {
          options.force_eos_at_max_length = false;
        });
    // A line at the limit then gets one token more than HF's, unless its EOS came there on its own.
    CHECK(unforced.identical + exact.at_limit / 2 <= unforced.total);
  }
}

TEST_CASE("the tokenizer reproduces Hugging Face's source ids for the golden inputs", "[e2e][parity]") {
  for (const char* name : {"marian_tiny_greedy.tsv", "marian_separate_greedy.tsv"}) {
    const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/" + name);
    const ModelFile file = ModelFile::open(golden_model(golden));
    const SentencePieceTokenizer tokenizer(tokenizer_spec(file));
    size_t identical = 0;
    for (const GoldenCase& golden_case : golden.cases)
      identical += tokenizer.encode_source(golden_case.source_text) == golden_case.source_ids;
    std::cout << fmt::format("tokenizer: {}/{} golden sources of {} identical to MarianTokenizer\n", identical,
                             golden.cases.size(), name);
    CHECK(identical == golden.cases.size());
  }
}

TEST_CASE("GPU fp32 matches Hugging Face generate() like the CPU does", "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* golden : {"marian_tiny_greedy.tsv", "marian_tiny_beam4.tsv", kControlGoldens[0], kControlGoldens[1],
                             kControlGoldens[2], kControlGoldens[3]}) {
    INFO(golden);
    const ParityReport report = check_parity(golden, Device::CUDA, DataType::F32, 16);
    CHECK(report.identical >= report.total * 99 / 100);
    CHECK(report.max_score_difference <= 1e-3);
  }
  check_limit_goldens(Device::CUDA);
}

// GPU fp16 against the CPU on the same weights: the bundled model, whose file stores fp16 weights, so
// both engines compute with identical parameters and only fp16 activations differ. Golden source texts,
// max 80 new tokens. The bar (>= 97% identical) is asserted here.
TEST_CASE("GPU fp16 gives the CPU's tokens on the bundled model for the golden inputs", "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  const ModelFile file = ModelFile::open(std::string(SEQTRANS_SOURCE_DIR) + "/models/opus-demo-en-de.seqtrans");
  const std::vector<std::vector<int32_t>> sources = tokenized_golden_sources(golden, file, golden.cases.size());
  EncoderDecoderModel cpu(file, {Device::CPU, DataType::F32});
  EncoderDecoderModel gpu(file, {Device::CUDA, DataType::F16});
  for (const int beam : {1, 4}) {
    const size_t identical =
        compare_best(search_in_batches(gpu, sources, beam, 16), search_in_batches(cpu, sources, beam, 16)).identical;
    std::cout << fmt::format("bundled model, beam {}: GPU fp16 = CPU fp32 on {}/{} golden inputs ({:.1f}%)\n", beam,
                             identical, sources.size(), 100.0 * identical / sources.size());
    CHECK(identical >= sources.size() * 97 / 100);
  }
}

// The tiny model flips under perturbations as small as fp16 rounding of its weights alone: a torch
// emulation of seqtrans's fp16 rounding points (fp16 weights, fp32 activations) reproduced 344/362 of
// its greedy goldens. This bar guards against fp16 bugs, which cost far more; the issue's >= 97% is
// checked above on same-weight terms.
TEST_CASE("GPU fp16 stays close to Hugging Face generate() on the tiny model", "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* golden : {"marian_tiny_greedy.tsv", "marian_tiny_beam4.tsv"}) {
    const ParityReport report = check_parity(golden, Device::CUDA, DataType::F16, 16);
    CHECK(report.identical >= report.total * 90 / 100);
  }
}

// Against Hugging Face's own fp16 generate() (scripts/make_fp16_goldens.py: the checkpoint in float16 on the
// GPU), where both engines round weights and activations to fp16. Hugging Face's fp16 gives its own fp32
// tokens on only 328/362 greedy and 315/362 beam-4 lines of this model (test/data/golden/README.md), so the
// bar sits below that; seqtrans gave 330/362 and 317/362 (H200).
TEST_CASE("GPU fp16 stays close to Hugging Face's fp16 generate() on the tiny model", "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* golden : {"marian_tiny_greedy_fp16.tsv", "marian_tiny_beam4_fp16.tsv"}) {
    const ParityReport report = check_parity(golden, Device::CUDA, DataType::F16, 16);
    CHECK(report.identical >= report.total * 85 / 100);
  }
}

// Each fp16 golden (scripts/make_fp16_goldens.py) reruns its fp32 golden: the same settings but dtype and device,
// the same sources and source ids, in the same order.
TEST_CASE("the fp16 goldens rerun their fp32 goldens' settings on the same sources", "[e2e][parity]") {
  const std::string directory = std::string(SEQTRANS_TEST_DATA) + "/golden/";
  size_t files = 0;
  for (const std::string stem : {"marian_tiny", "nllb_tiny", "m2m100_tiny", "mbart50_tiny", "llama_tiny_mha",
                                 "llama_tiny_gqa2", "llama_tiny_gqa4", "llama_tiny_bias"})
    for (const std::string set : {"greedy", "beam4"}) {
      INFO(stem << "_" << set);
      const GoldenFile fp32 = read_golden(directory + stem + "_" + set + ".tsv");
      const GoldenFile fp16 = read_golden(directory + stem + "_" + set + "_fp16.tsv");
      CHECK(fp16.settings.at("dtype") == "float16");
      CHECK(fp16.settings.at("device") == "cuda");
      std::map<std::string, std::string> same = fp16.settings, expected = fp32.settings;
      for (const char* key : {"dtype", "device"}) same.erase(key), expected.erase(key);
      CHECK(same == expected);
      REQUIRE(fp16.cases.size() == fp32.cases.size());
      for (size_t i = 0; i < fp16.cases.size(); ++i) {
        CHECK(fp16.cases[i].source_text == fp32.cases[i].source_text);
        CHECK(fp16.cases[i].source_ids == fp32.cases[i].source_ids);
      }
      ++files;
    }
  CHECK(files == 16);
}
