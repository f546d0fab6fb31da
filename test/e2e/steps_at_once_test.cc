// Greedy steps run several at once on the real model (EngineTuning::steps_per_read): each step after the
// first takes every slot's input from the step before on the device, and one copy brings all the steps'
// candidates back. Results must be those of steps read one at a time: in batches of 1 and 5 and through
// the scheduler with sentences joining, with and without a minimum length; on the CPU (forced) and on the
// GPU in fp32 (graphs) and fp16.
#include <iostream>
#include <map>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/search_runs.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

std::vector<SearchResult> in_batches(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                     const SearchOptions& options, size_t batch_size) {
  std::vector<SearchResult> results;
  for (size_t begin = 0; begin < sources.size(); begin += batch_size) {
    const size_t end = std::min(sources.size(), begin + batch_size);
    const std::vector<std::vector<int32_t>> batch(sources.begin() + static_cast<std::ptrdiff_t>(begin),
                                                  sources.begin() + static_cast<std::ptrdiff_t>(end));
    for (SearchResult& result : search(model, batch, options)) results.push_back(std::move(result));
  }
  return results;
}

// Through the scheduler: at most 4 sentences in flight, joining one at a time as others finish.
std::vector<SearchResult> scheduled(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                    const SearchOptions& options) {
  SchedulerOptions scheduling;
  scheduling.max_sentences = 4;
  scheduling.max_tokens = 100000;
  scheduling.min_join = 1;
  DecodingScheduler scheduler(model, options, scheduling);
  for (size_t i = 0; i < sources.size(); ++i) scheduler.submit(SessionSentence{i, sources[i], i});
  std::map<uint64_t, SearchResult> by_id;
  std::vector<FinishedSentence> finished;
  while (!scheduler.idle()) {
    finished.clear();
    scheduler.iterate(finished);
    for (FinishedSentence& sentence : finished) by_id[sentence.id] = std::move(sentence.result);
  }
  std::vector<SearchResult> results;
  for (auto& [id, result] : by_id) results.push_back(std::move(result));
  return results;
}

// Steps at once against one at a time on `count` golden inputs: at least `min_share` of the lines keep
// their tokens, with scores within `tolerance`.
void check_steps_at_once_agree(const ModelOptions& base, size_t count, double min_share, double tolerance) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  const ModelFile file = ModelFile::open(converted_tiny_model());
  const std::vector<std::vector<int32_t>> sources = golden_source_ids(golden, count);
  ModelOptions grouped_options = base, single_options = base;
  grouped_options.tuning.steps_per_read = kGreedyStepsPerRead;
  single_options.tuning.steps_per_read = 1;
  EncoderDecoderModel grouped(file, grouped_options), single(file, single_options);
  for (const int min_length : {0, 6}) {
    SearchOptions options;
    options.beam_size = 1;
    options.max_length_a = 60;
    options.max_length_b = 0.0f;
    options.min_length = min_length;
    for (const size_t batch : {size_t{1}, size_t{5}, size_t{0}}) {  // 0: the scheduler
      CAPTURE(min_length, batch);
      const auto run = [&](StepModel& model) {
        return batch == 0 ? scheduled(model, sources, options) : in_batches(model, sources, options, batch);
      };
      const auto [identical, max_difference] = compare_best(run(grouped), run(single));
      std::cout << fmt::format("greedy steps at once, min length {}, {}: {}/{} identical, scores within {:.1e}\n",
                               min_length, batch == 0 ? "scheduler" : fmt::format("batches of {}", batch), identical,
                               sources.size(), max_difference);
      CHECK(identical >= static_cast<size_t>(min_share * static_cast<double>(sources.size())));
      CHECK(max_difference <= tolerance);
    }
  }
  CHECK(grouped.step_counts().at_once > 0);
  CHECK(single.step_counts().at_once == 0);
}

}  // namespace

TEST_CASE("greedy steps at once give the results of steps read one at a time (CPU, forced)", "[e2e][steps_at_once]") {
  check_steps_at_once_agree({Device::CPU, DataType::F32}, 24, 1.0, 1e-4);
}

TEST_CASE("greedy steps at once give the results of steps read one at a time (GPU fp32)",
          "[gpu][e2e][steps_at_once]") {
  REQUIRE_GPU_OR_SKIP();
  check_steps_at_once_agree({Device::CUDA, DataType::F32}, 40, 1.0, 1e-4);
}

// fp16 sums depend on the row count (tensor cores from 3 rows), and a sentence that ends inside a group of
// steps keeps its row until the group ends: a few lines may differ, as between batch sizes, and scores
// move by fp16 roundings (H100: 40/40 identical in every case, scores within 1.4e-3).
TEST_CASE("greedy steps at once in fp16 keep the results of steps read one at a time", "[gpu][e2e][steps_at_once]") {
  REQUIRE_GPU_OR_SKIP();
  check_steps_at_once_agree({Device::CUDA, DataType::F16}, 40, 0.85, 1e-2);
}
