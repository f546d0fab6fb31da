// Golden inputs searched in batches, and two engines' best hypotheses compared: for the end-to-end tests
// that check one path of the engine against another (graphs, the persistent kernel, fp16 against the CPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/model_file.h"
#include "search/search.h"
#include "support/golden.h"

namespace seqtrans::testing {

// The source ids of the first `count` golden inputs.
std::vector<std::vector<int32_t>> golden_source_ids(const GoldenFile& golden, size_t count);

// The first `count` golden source texts, tokenized by the model file's tokenizer and truncated to its positions.
std::vector<std::vector<int32_t>> tokenized_golden_sources(const GoldenFile& golden, const ModelFile& file,
                                                           size_t count);

// search() over `sources`, `batch_size` sentences at a time, beam `beam`, at most 80 new tokens.
std::vector<SearchResult> search_in_batches(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                            int beam, size_t batch_size);

// How many best hypotheses have identical tokens, and the largest score difference among those.
struct BestAgreement {
  size_t identical = 0;
  double max_score_difference = 0.0;
};
BestAgreement compare_best(const std::vector<SearchResult>& actual, const std::vector<SearchResult>& expected);

}  // namespace seqtrans::testing
