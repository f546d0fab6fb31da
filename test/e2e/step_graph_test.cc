// Decoder steps replayed as CUDA graphs against the same steps launched op by op: the graph path pads
// the slots to a bucket and moves beams through the history table, so both batching shapes that pad
// (5 sentences: 5 -> 6 rows greedy, 20 -> 24 rows with 4 beams) and ones that do not are compared.
#include <cmath>
#include <iostream>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

std::vector<SearchResult> run_goldens(EncoderDecoderModel& model, const GoldenFile& golden, int beam,
                                      size_t batch_size) {
  SearchOptions options;
  options.beam_size = beam;
  options.max_length_a = 80;
  options.max_length_b = 0.0f;
  // The first 120 inputs (3 to 229 ids) keep the test short enough for compute-sanitizer's memcheck.
  const size_t count = std::min<size_t>(golden.cases.size(), 120);
  std::vector<SearchResult> results;
  for (size_t begin = 0; begin < count; begin += batch_size) {
    std::vector<std::vector<int32_t>> sources;
    for (size_t i = begin; i < std::min(count, begin + batch_size); ++i)
      sources.push_back(golden.cases[i].source_ids);
    for (SearchResult& result : search(model, sources, options)) results.push_back(std::move(result));
  }
  return results;
}

}  // namespace

TEST_CASE("decoder steps replayed as CUDA graphs equal steps launched op by op", "[gpu][e2e]") {
  REQUIRE_GPU_OR_SKIP();
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  const ModelFile file = ModelFile::open(converted_tiny_model());
  for (const int beam : {1, 4}) {
    for (const size_t batch_size : {size_t{5}, size_t{16}}) {
      ModelOptions graphs{Device::CUDA, DataType::F32};
      ModelOptions launches = graphs;
      launches.cuda_graphs = false;
      EncoderDecoderModel with_graphs(file, graphs), without_graphs(file, launches);
      const std::vector<SearchResult> expected = run_goldens(without_graphs, golden, beam, batch_size);
      const std::vector<SearchResult> actual = run_goldens(with_graphs, golden, beam, batch_size);
      REQUIRE(actual.size() == expected.size());
      size_t identical = 0;
      double max_difference = 0.0;
      for (size_t i = 0; i < actual.size(); ++i) {
        const Hypothesis& a = actual[i].hypotheses.at(0);
        const Hypothesis& e = expected[i].hypotheses.at(0);
        if (a.tokens != e.tokens) continue;
        ++identical;
        max_difference = std::max(max_difference, std::abs(static_cast<double>(a.score) - e.score));
      }
      const StepCounts& counts = with_graphs.step_counts();
      std::cout << fmt::format("graphs, beam {} batch {}: {}/{} identical, max score difference {:.2e}; steps "
                               "{} launched, {} captured, {} replayed\n",
                               beam, batch_size, identical, actual.size(), max_difference, counts.launched,
                               counts.captured, counts.replayed);
      CHECK(identical == actual.size());
      CHECK(max_difference <= 1e-4);
      CHECK(counts.captured > 0);
      CHECK(counts.replayed > counts.captured);
      CHECK(without_graphs.step_counts().replayed == 0);
    }
  }
}
