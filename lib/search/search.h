// The search entry point: picks greedy, beam search or sampling from the options and runs it against a
// step model (docs/ARCHITECTURE.md §1). Results come back in the order of `sources`.
#pragma once

#include <cstdint>
#include <vector>

#include "search/options.h"
#include "search/result.h"
#include "search/sentence_search.h"
#include "search/step_model.h"

namespace seqtrans {

// Translates every source sentence (token ids, EOS included) as one batch that only shrinks; one result
// per source, in input order. Sentence i's random stream (sampling) is keyed by i.
std::vector<SearchResult> search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                 const SearchOptions& options);

// search() with the random stream of sentence i keyed by streams[i] (the input line number) instead of i,
// and, when `prefixes` is given ([sources]), sentence i's translation starting with prefixes[i]
// (make_sentence_search says how).
std::vector<SearchResult> search_with_streams(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                              const SearchOptions& options, const std::vector<uint64_t>& streams,
                                              const std::vector<std::vector<int32_t>>& prefixes = {});
// The same with each sentence's forced start (a multilingual model's language token, a prefix), [sources].
std::vector<SearchResult> search_with_starts(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                             const SearchOptions& options, const std::vector<uint64_t>& streams,
                                             const std::vector<ForcedStart>& starts);

// Throws seqtrans::Error with a one-line message naming the first invalid option.
void validate_options(const SearchOptions& options);

// Greedy when beam_size is 1 without sampling filters, sampling when beam_size is 1 with them, beam
// search otherwise. Assumes validated options.
SearchKind search_kind(const SearchOptions& options);

// Decoder slots a sentence takes at most: its beams, or its samples.
int slots_per_sentence(const SearchOptions& options);

// Maximum generated tokens, EOS included, for a source of `source_length` ids (its EOS counted):
// floor(max_length_a + max_length_b * source_length), at least 1. A tolerance of 1e-4 absorbs fp32
// factors such as 0.7f that sit just below their decimal value.
int max_generated_length(const SearchOptions& options, size_t source_length);

}  // namespace seqtrans
