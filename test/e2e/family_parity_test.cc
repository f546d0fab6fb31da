// Parity with Hugging Face generate() for the multilingual families: tiny NLLB-200 (M2M100 architecture with
// NllbTokenizer), M2M-100 and mBART-50 checkpoints laid out as the hub ships them, converted here with
// scripts/convert_hf.py; goldens by scripts/make_family_goldens.py (English to German, the target language
// forced as the first generated token, HF's forced_bos_token_id). The tokenizer must frame every source as
// HF's does, and the search must give every golden line's tokens, on the CPU and (gpu tag) the GPU in fp32.
#include <cmath>
#include <iostream>
#include <string>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/process.h"
#include "translator.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

const char* const kFamilyGoldens[] = {"nllb_tiny_greedy.tsv",   "nllb_tiny_beam4.tsv",   "m2m100_tiny_greedy.tsv",
                                      "m2m100_tiny_beam4.tsv", "mbart50_tiny_greedy.tsv", "mbart50_tiny_beam4.tsv"};

const std::string& setting(const GoldenFile& golden, const std::string& key) {
  const auto found = golden.settings.find(key);
  if (found == golden.settings.end()) throw Error("golden settings lack " + key);
  return found->second;
}

struct FamilyParity {
  size_t sources_identical = 0;
  size_t outputs_identical = 0;
  size_t total = 0;
  double max_score_difference = 0.0;
};

FamilyParity check_family(const std::string& golden_name, Device device, DataType dtype) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/" + golden_name);
  REQUIRE(golden.cases.size() >= 50);
  const ModelFile file = ModelFile::open(converted_golden_model(setting(golden, "model")));
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(tokenizer_spec(file));
  const Languages languages{setting(golden, "source_lang"), setting(golden, "target_lang")};
  const std::vector<int32_t> start = tokenizer->target_start(languages.target);
  REQUIRE(start == std::vector<int32_t>{std::stoi(setting(golden, "forced_bos_token_id"))});

  FamilyParity parity;
  std::vector<std::vector<int32_t>> sources;
  std::vector<uint64_t> streams;
  std::vector<ForcedStart> starts;
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const std::vector<int32_t> source = tokenizer->encode_source(golden.cases[i].source_text, languages.source);
    if (source == golden.cases[i].source_ids)
      ++parity.sources_identical;
    else
      std::cout << fmt::format("  source {} differs: {} ids against HF's {}: '{}'\n", i, source.size(),
                               golden.cases[i].source_ids.size(), printable(golden.cases[i].source_text).substr(0, 80));
    sources.push_back(golden.cases[i].source_ids);
    streams.push_back(i);
    starts.push_back(ForcedStart{start, /*generated=*/1});
  }
  EncoderDecoderModel model(file, {device, dtype});
  const SearchOptions options = golden_search_options(golden);
  const std::vector<SearchResult> results = search_with_starts(model, sources, options, streams, starts);
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const Hypothesis& best = results[i].hypotheses.at(0);
    ++parity.total;
    if (best.tokens != golden.cases[i].output_ids) continue;
    ++parity.outputs_identical;
    // The greedy goldens sum the raw logits' log-probs, so a forced EOS at the limit counts its model
    // log-prob there, where seqtrans (and HF's processed scores) count 0: those lines' scores are not compared.
    const bool forced_end = options.force_eos_at_max_length &&
                            static_cast<int>(golden.cases[i].output_ids.size()) + 1 >= options.max_length_a;
    if (!std::isnan(golden.cases[i].score) && !(forced_end && options.beam_size == 1))
      parity.max_score_difference =
          std::max(parity.max_score_difference, std::abs(static_cast<double>(best.score) - golden.cases[i].score));
  }
  std::cout << fmt::format("family parity {} on {} {}: sources {}/{}, outputs {}/{} identical, max score difference "
                           "{:.2e}\n",
                           golden_name, device_name(device), dtype_name(dtype), parity.sources_identical, parity.total,
                           parity.outputs_identical, parity.total, parity.max_score_difference);
  return parity;
}

}  // namespace

TEST_CASE("NLLB-200, M2M-100 and mBART-50 on the CPU match Hugging Face generate() token for token",
          "[e2e][parity]") {
  for (const char* golden : kFamilyGoldens) {
    INFO(golden);
    const FamilyParity parity = check_family(golden, Device::CPU, DataType::F32);
    // mBART-50's tiny Unigram model has equal-score segmentations of "000", which Debian's libsentencepiece
    // (0.1.97) and the Python sentencepiece HF uses (0.2) break differently: 2 of its 100 sources ("5,000",
    // "3,000"). NLLB-200 and M2M-100 match on every line.
    CHECK(parity.sources_identical >= parity.total * 98 / 100);
    CHECK(parity.outputs_identical == parity.total);
    CHECK(parity.max_score_difference <= 1e-3);
  }
}

TEST_CASE("NLLB-200, M2M-100 and mBART-50 on the GPU match Hugging Face generate() (fp32), and mostly in fp16",
          "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* golden : kFamilyGoldens) {
    INFO(golden);
    const FamilyParity fp32 = check_family(golden, Device::CUDA, DataType::F32);
    CHECK(fp32.outputs_identical >= fp32.total * 99 / 100);
    CHECK(fp32.max_score_difference <= 1e-3);
    const FamilyParity fp16 = check_family(golden, Device::CUDA, DataType::F16);
    CHECK(fp16.outputs_identical >= fp16.total * 90 / 100);
  }
}

// The command line end to end: `translate --source-lang --target-lang` prints the text of Hugging Face's
// tokens for every golden line (greedy), and a multilingual model without languages is refused in one line.
TEST_CASE("translate --source-lang --target-lang prints Hugging Face's translations", "[e2e][parity]") {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/nllb_tiny_greedy.tsv");
  const std::string& model_path = converted_golden_model(setting(golden, "model"));
  const ModelFile file = ModelFile::open(model_path);
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(tokenizer_spec(file));
  std::string input;
  for (const GoldenCase& golden_case : golden.cases) input += golden_case.source_text + "\n";
  const std::vector<std::string> base{seqtrans_binary(), "translate", "-m", model_path, "--device", "cpu", "-q",
                                      "-b", "1", "--max-length", setting(golden, "max_new_tokens")};
  std::vector<std::string> arguments = base;
  arguments.insert(arguments.end(), {"--source-lang", setting(golden, "source_lang"), "--target-lang",
                                     setting(golden, "target_lang")});
  const ProcessResult result = run_process(arguments, input, 300);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = split_lines(result.out);
  REQUIRE(lines.size() == golden.cases.size());
  size_t identical = 0;
  for (size_t i = 0; i < lines.size(); ++i) identical += lines[i] == tokenizer->decode_target(golden.cases[i].output_ids);
  CHECK(identical == lines.size());

  const ProcessResult refused = run_process(base, "Hello.\n", 60);
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("needs --source-lang") != std::string::npos);
  CHECK(refused.err.find("inspect_model.py --languages") != std::string::npos);
  CHECK(count_lines(refused.err) == 1);
}

// Against Hugging Face's own fp16 generate() (scripts/make_fp16_goldens.py), where both engines round weights
// and activations to fp16. Hugging Face's fp16 gives its own fp32 tokens on 93-98 of each set's 100 lines (the
// goldens' README); seqtrans gave Hugging Face's fp16 tokens on 92-99 (H200).
TEST_CASE("NLLB-200, M2M-100 and mBART-50 on the GPU in fp16 stay close to Hugging Face's fp16 generate()",
          "[gpu][e2e][parity]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* golden : kFamilyGoldens) {
    const std::string name = std::string(golden).substr(0, std::string(golden).size() - 4) + "_fp16.tsv";
    INFO(name);
    const FamilyParity fp16 = check_family(name, Device::CUDA, DataType::F16);
    CHECK(fp16.outputs_identical * 100 >= fp16.total * 90);
  }
}
