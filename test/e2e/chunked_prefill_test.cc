// Chunked prefill (EngineTuning::prefill_chunk_tokens) on the tiny Llama goldens: prompts written a few
// tokens per scheduler iteration, with rows decoding between the chunks (with none decoding, a pass takes
// them whole), give token for token what a whole prefill gives, and Hugging Face's goldens still come out;
// greedy and beam 4, prompts from 1 token to several times the chunk, one prompt at a time and many at once. The CPU always, the GPU in fp32 (gpu tag).
#include <cmath>
#include <map>
#include <string>

#include "catch.h"
#include "models/decoder_only_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

const std::string kModel = "llama_tiny_gqa2";

GoldenFile golden_of(const std::string& search) {
  return read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/" + kModel + "_" + search + ".tsv");
}

std::unique_ptr<DecoderOnlyModel> model_with_chunk(Device device, int64_t chunk, bool batch_invariant = false) {
  const ModelFile file = ModelFile::open(converted_golden_model(kModel));
  ModelOptions options{device, DataType::F32, {}};
  options.tuning.prefill_chunk_tokens = chunk;
  options.tuning.batch_invariant = batch_invariant;
  return std::make_unique<DecoderOnlyModel>(file, options);
}

// The golden prompts (30 to 45 tokens), then prompts of very different lengths: BOS alone, BOS and one
// token, and BOS followed by four golden prompts' tokens (about 150, many chunks of 5 or 16; the model's
// 256 positions leave room for the 64 new tokens).
std::vector<std::vector<int32_t>> mixed_prompts(const GoldenFile& golden) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < 8; ++i) prompts.push_back(golden.cases[i].source_ids);
  const int32_t bos = golden.cases[0].source_ids.front();
  prompts.push_back({bos});
  prompts.push_back({bos, golden.cases[1].source_ids[1]});
  for (size_t first : {2, 9}) {
    std::vector<int32_t> longer{bos};
    for (size_t i = first; i < first + 4; ++i)
      longer.insert(longer.end(), golden.cases[i].source_ids.begin() + 1, golden.cases[i].source_ids.end());
    REQUIRE(longer.size() + 64 < 256);
    prompts.insert(prompts.begin() + static_cast<std::ptrdiff_t>(first), longer);
  }
  return prompts;
}

struct ScheduledRun {
  std::vector<SearchResult> results;
  size_t chunks = 0;            // continue_admission calls
  size_t interleaved = 0;       // iterations that ended with rows decoding beside a prompt still prefilling
};

// The prompts through the decoding scheduler (iteration-level batching, joining as soon as they fit),
// `sentences` in flight at most.
ScheduledRun schedule(DecoderOnlyModel& model, const std::vector<std::vector<int32_t>>& prompts,
                      const SearchOptions& search, size_t sentences) {
  SchedulerOptions scheduling;
  scheduling.max_sentences = sentences;
  scheduling.min_join = 1;
  DecodingScheduler scheduler(model, search, scheduling);
  scheduler.reserve_pools();
  for (size_t i = 0; i < prompts.size(); ++i) scheduler.submit(SessionSentence{i, prompts[i], i});
  ScheduledRun run;
  run.results.resize(prompts.size());
  std::vector<FinishedSentence> finished;
  for (size_t iterations = 0; !scheduler.idle(); ++iterations) {
    REQUIRE(iterations < 100000);
    finished.clear();
    scheduler.iterate(finished);
    for (FinishedSentence& sentence : finished) run.results[sentence.id] = std::move(sentence.result);
    if (scheduler.state().admitting() > 0 && scheduler.state().slots() > 0) ++run.interleaved;
  }
  run.chunks = scheduler.stats().admission_shares;
  return run;
}

// Passes of other sizes may round a row's product differently (BLAS, issue 32): scores agree to rounding,
// tokens exactly; in batch-invariant mode (EngineTuning::batch_invariant) scores to the bit.
void check_same_tokens(const std::vector<SearchResult>& actual, const std::vector<SearchResult>& expected,
                       float score_tolerance = 1e-4f) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    CAPTURE(i);
    REQUIRE(actual[i].hypotheses.size() == expected[i].hypotheses.size());
    for (size_t h = 0; h < actual[i].hypotheses.size(); ++h) {
      CHECK(actual[i].hypotheses[h].tokens == expected[i].hypotheses[h].tokens);
      CHECK(std::abs(actual[i].hypotheses[h].score - expected[i].hypotheses[h].score) <= score_tolerance);
    }
  }
}

void check_chunked_as_whole(Device device) {
  for (const char* search_name : {"greedy", "beam4"}) {
    CAPTURE(search_name);
    const GoldenFile golden = golden_of(search_name);
    const SearchOptions search = golden_search_options(golden);
    const std::vector<std::vector<int32_t>> prompts = mixed_prompts(golden);
    // The reference: each prompt alone, prefilled whole.
    const std::unique_ptr<DecoderOnlyModel> whole = model_with_chunk(device, 0);
    const ScheduledRun alone = schedule(*whole, prompts, search, 1);
    CHECK(alone.chunks == 0);
    check_same_tokens(schedule(*whole, prompts, search, 8).results, alone.results);
    for (const int64_t chunk : {5, 16}) {
      CAPTURE(chunk);
      const std::unique_ptr<DecoderOnlyModel> chunked = model_with_chunk(device, chunk);
      const ScheduledRun serial = schedule(*chunked, prompts, search, 1);
      // One at a time, no row decodes beside a prompt, so nothing waits on its prefill: one pass each.
      CHECK(serial.chunks == prompts.size());
      CHECK(serial.interleaved == 0);
      check_same_tokens(serial.results, alone.results);
      const ScheduledRun together = schedule(*chunked, prompts, search, 8);
      // The first 8 prompts go in one pass; the long prompt admitted later, with rows decoding, in 150 / chunk.
      CHECK(together.interleaved > 0);
      CHECK(together.chunks >= static_cast<size_t>(140 / chunk));
      check_same_tokens(together.results, alone.results);
      // One batch (search()): every prompt admitted at once, the first ones decoding while the rest prefill.
      check_same_tokens(seqtrans::search(*chunked, prompts, search), alone.results);
    }
  }
}

// Batch-invariant arithmetic: a chunk's tokens and a step's rows compute as they would alone, so chunks of 5
// with rows decoding between them give the whole prefill's scores to the bit.
void check_chunked_bitwise(Device device) {
  for (const char* search_name : {"greedy", "beam4"}) {
    CAPTURE(search_name);
    const GoldenFile golden = golden_of(search_name);
    const SearchOptions search = golden_search_options(golden);
    const std::vector<std::vector<int32_t>> prompts = mixed_prompts(golden);
    const std::unique_ptr<DecoderOnlyModel> whole = model_with_chunk(device, 0, /*batch_invariant=*/true);
    const std::unique_ptr<DecoderOnlyModel> chunked = model_with_chunk(device, 5, /*batch_invariant=*/true);
    const ScheduledRun together = schedule(*chunked, prompts, search, 8);
    CHECK(together.interleaved > 0);
    check_same_tokens(together.results, schedule(*whole, prompts, search, 1).results, 0.0f);
  }
}

// Hugging Face's tokens with chunks of 5 and 16, every golden prompt admitted at once.
void check_goldens_chunked(Device device) {
  for (const char* search_name : {"greedy", "beam4"}) {
    const GoldenFile golden = golden_of(search_name);
    std::vector<std::vector<int32_t>> prompts;
    for (const GoldenCase& line : golden.cases) prompts.push_back(line.source_ids);
    for (const int64_t chunk : {5, 16}) {
      CAPTURE(search_name, chunk);
      const std::unique_ptr<DecoderOnlyModel> model = model_with_chunk(device, chunk);
      const std::vector<SearchResult> results = seqtrans::search(*model, prompts, golden_search_options(golden));
      for (size_t i = 0; i < golden.cases.size(); ++i) {
        CAPTURE(i);
        CHECK(results[i].hypotheses.at(0).tokens == golden.cases[i].output_ids);
      }
    }
  }
}

}  // namespace

TEST_CASE("chunked prefill: the same tokens as a whole prefill, alone and with rows decoding between chunks",
          "[llama][prefill]") {
  check_chunked_as_whole(Device::CPU);
}

TEST_CASE("chunked prefill: Hugging Face's goldens with chunks of 5 and 16 tokens", "[llama][prefill]") {
  check_goldens_chunked(Device::CPU);
}

TEST_CASE("chunked prefill, batch-invariant: the whole prefill's scores to the bit", "[llama][prefill]") {
  check_chunked_bitwise(Device::CPU);
}

TEST_CASE("chunked prefill on the GPU: the same tokens as a whole prefill, and the goldens", "[llama][prefill][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  check_chunked_as_whole(Device::CUDA);
  check_goldens_chunked(Device::CUDA);
  check_chunked_bitwise(Device::CUDA);
}
