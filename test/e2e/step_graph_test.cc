// Decoder steps replayed as CUDA graphs against the same steps launched op by op: the graph path pads
// the slots to a bucket and moves beams through the history table, so both batching shapes that pad
// (5 sentences: 5 -> 6 rows greedy, 20 -> 24 rows with 4 beams) and ones that do not are compared.
#include <iostream>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "search/search.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/search_runs.h"

using namespace seqtrans;
using namespace seqtrans::testing;

TEST_CASE("decoder steps replayed as CUDA graphs equal steps launched op by op", "[gpu][e2e]") {
  REQUIRE_GPU_OR_SKIP();
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  const ModelFile file = ModelFile::open(converted_tiny_model());
  // The first 120 inputs (3 to 229 ids) keep the test short enough for compute-sanitizer's memcheck.
  const std::vector<std::vector<int32_t>> sources = golden_source_ids(golden, 120);
  for (const int beam : {1, 4}) {
    for (const size_t batch_size : {size_t{5}, size_t{16}}) {
      ModelOptions graphs{Device::CUDA, DataType::F32};
      ModelOptions launches = graphs;
      launches.tuning.cuda_graphs = false;
      EncoderDecoderModel with_graphs(file, graphs), without_graphs(file, launches);
      const std::vector<SearchResult> expected = search_in_batches(without_graphs, sources, beam, batch_size);
      const std::vector<SearchResult> actual = search_in_batches(with_graphs, sources, beam, batch_size);
      REQUIRE(actual.size() == expected.size());
      const auto [identical, max_difference] = compare_best(actual, expected);
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
