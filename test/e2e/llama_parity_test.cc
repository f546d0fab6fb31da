// Parity with Hugging Face generate() for decoder-only (Llama) models: tiny LlamaForCausalLM checkpoints
// (grouped-query ratios 1, 2 and 4, rope_theta 1e4 and 5e5, tied and untied output, one with biases) built
// and converted by scripts/make_llama_goldens.py, prompted as "English: {source}\nGerman:". The prompt is
// prefilled into the row pool, generation continues from it; every golden line's tokens must come out, on
// the CPU and (gpu tag) the GPU in fp32, and in fp16 at least 98% of them. Prompts decoded together must
// give what each gives alone (iteration-level batching, prefill passes).
#include <cmath>
#include <iostream>
#include <string>

#include "catch.h"
#include "models/decoder_only_model.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

const char* const kLlamaModels[] = {"llama_tiny_mha", "llama_tiny_gqa2", "llama_tiny_gqa4", "llama_tiny_bias"};

struct LlamaRun {
  GoldenFile golden;
  std::vector<SearchResult> results;
};

LlamaRun run_golden(const std::string& model, const std::string& search, Device device, DataType dtype) {
  LlamaRun run;
  run.golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/" + model + "_" + search + ".tsv");
  REQUIRE(run.golden.cases.size() >= 20);
  const ModelFile file = ModelFile::open(converted_golden_model(model));
  DecoderOnlyModel decoder(file, {device, dtype});
  std::vector<std::vector<int32_t>> prompts;
  for (const GoldenCase& line : run.golden.cases) prompts.push_back(line.source_ids);
  run.results = seqtrans::search(decoder, prompts, golden_search_options(run.golden));
  return run;
}

size_t identical_lines(const LlamaRun& run) {
  size_t identical = 0;
  for (size_t i = 0; i < run.golden.cases.size(); ++i)
    if (run.results[i].hypotheses.at(0).tokens == run.golden.cases[i].output_ids) ++identical;
  return identical;
}

void check_identical(const std::string& model, const std::string& search, Device device) {
  const LlamaRun run = run_golden(model, search, device, DataType::F32);
  const size_t identical = identical_lines(run);
  std::cout << fmt::format("llama parity {} {} {} fp32: {}/{} identical\n", model, search, device_name(device),
                           identical, run.golden.cases.size());
  CHECK(identical == run.golden.cases.size());
}

void check_all_identical(Device device) {
  for (const char* model : kLlamaModels)
    for (const char* search : {"greedy", "beam4"}) check_identical(model, search, device);
  // Repetition penalty and no-repeat n-grams read the prompt too, as HF's input_ids
  // (scripts/make_llama_repetition_goldens.py).
  for (const char* search : {"repetition_greedy", "repetition_beam4"}) check_identical("llama_tiny_gqa2", search, device);
}

struct IdenticalLines {
  size_t identical = 0, total = 0;
};

// GPU fp16 over every model's greedy and beam-4 goldens (`suffix` "": HF's fp32 ones; "_fp16": HF's fp16 ones),
// each set's count printed.
IdenticalLines fp16_identical_lines(const std::string& suffix) {
  IdenticalLines lines;
  for (const char* model : kLlamaModels)
    for (const std::string search : {"greedy", "beam4"}) {
      const LlamaRun run = run_golden(model, search + suffix, Device::CUDA, DataType::F16);
      const size_t identical = identical_lines(run);
      std::cout << fmt::format("llama parity {} {} cuda fp16: {}/{} identical\n", model, search + suffix, identical,
                               run.golden.cases.size());
      lines.identical += identical;
      lines.total += run.golden.cases.size();
    }
  return lines;
}

}  // namespace

TEST_CASE("Llama goldens: the CPU gives Hugging Face's tokens, greedy and beam 4", "[llama]") {
  check_all_identical(Device::CPU);
}

TEST_CASE("Llama: prompts decoded together give what each gives alone", "[llama]") {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/llama_tiny_gqa2_beam4.tsv");
  const ModelFile file = ModelFile::open(converted_golden_model("llama_tiny_gqa2"));
  DecoderOnlyModel decoder(file, {});
  const SearchOptions options = golden_search_options(golden);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < 12; ++i) prompts.push_back(golden.cases[i].source_ids);
  const std::vector<SearchResult> together = seqtrans::search(decoder, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<SearchResult> alone = seqtrans::search(decoder, {prompts[i]}, options);
    CHECK(alone[0].hypotheses.at(0).tokens == together[i].hypotheses.at(0).tokens);
    // The CPU's BLAS may round a row's product differently for other row counts (issue 32): scores agree to
    // rounding, tokens exactly.
    CHECK(std::abs(alone[0].hypotheses.at(0).score - together[i].hypotheses.at(0).score) < 1e-4f);
  }
}

TEST_CASE("Llama goldens on the GPU: fp32 identical, fp16 at least 98%", "[llama][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  check_all_identical(Device::CUDA);
  // fp16 over all 400 lines: these briefly trained models have near-ties (top-2 gaps down to 3e-5, the
  // goldens' READMEs), which fp16 rounding flips a line or two of a set at a time.
  const IdenticalLines fp16 = fp16_identical_lines("");
  CHECK(fp16.identical * 100 >= fp16.total * 98);
}

// Against Hugging Face's own fp16 generate() (scripts/make_fp16_goldens.py), where both engines round weights
// and activations to fp16. Hugging Face's fp16 gives its own fp32 tokens on 386/400 lines (the goldens'
// README); seqtrans gave Hugging Face's fp16 tokens on 391/400 (H200).
TEST_CASE("Llama goldens on the GPU in fp16 against Hugging Face's fp16 generate()", "[llama][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const IdenticalLines fp16 = fp16_identical_lines("_fp16");
  CHECK(fp16.identical * 100 >= fp16.total * 95);
}
