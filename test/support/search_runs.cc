#include "support/search_runs.h"

#include <algorithm>
#include <cmath>

#include "text/sentencepiece_tokenizer.h"
#include "translator.h"

namespace seqtrans::testing {

std::vector<std::vector<int32_t>> golden_source_ids(const GoldenFile& golden, size_t count) {
  std::vector<std::vector<int32_t>> sources;
  for (size_t i = 0; i < std::min(count, golden.cases.size()); ++i) sources.push_back(golden.cases[i].source_ids);
  return sources;
}

std::vector<std::vector<int32_t>> tokenized_golden_sources(const GoldenFile& golden, const ModelFile& file,
                                                           size_t count) {
  const SentencePieceTokenizer tokenizer(tokenizer_spec(file));
  std::vector<std::vector<int32_t>> sources;
  for (size_t i = 0; i < std::min(count, golden.cases.size()); ++i) {
    sources.push_back(tokenizer.encode_source(golden.cases[i].source_text));
    tokenizer.truncate_source(sources.back(), static_cast<size_t>(file.config().max_positions));
  }
  return sources;
}

std::vector<SearchResult> search_in_batches(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                            int beam, size_t batch_size) {
  SearchOptions options;
  options.beam_size = beam;
  options.max_length_a = 80;
  options.max_length_b = 0.0f;
  std::vector<SearchResult> results;
  for (size_t begin = 0; begin < sources.size(); begin += batch_size) {
    const auto first = sources.begin() + static_cast<std::ptrdiff_t>(begin);
    const std::vector<std::vector<int32_t>> batch(first, first + static_cast<std::ptrdiff_t>(
                                                                     std::min(batch_size, sources.size() - begin)));
    for (SearchResult& result : search(model, batch, options)) results.push_back(std::move(result));
  }
  return results;
}

BestAgreement compare_best(const std::vector<SearchResult>& actual, const std::vector<SearchResult>& expected) {
  BestAgreement agreement;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    const Hypothesis& a = actual[i].hypotheses.at(0);
    const Hypothesis& e = expected[i].hypotheses.at(0);
    if (a.tokens != e.tokens) continue;
    ++agreement.identical;
    agreement.max_score_difference =
        std::max(agreement.max_score_difference, std::abs(static_cast<double>(a.score) - e.score));
  }
  return agreement;
}

}  // namespace seqtrans::testing
