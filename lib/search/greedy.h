// Greedy search, and the one-path-per-sentence decoding loop that greedy and sampling share.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "search/logits_processors.h"
#include "search/options.h"
#include "search/result.h"
#include "search/step_model.h"

namespace seqtrans {

// Chooses the next token of sentence `sentence` from its masked logits row (raw logits with suppressed
// ids and forced EOS applied; the picker may modify the row). Returns -1 when no token is possible.
using TokenPicker = std::function<int32_t(size_t sentence, ScoreRow masked_logits, const RowPosition& position)>;

// Decodes one hypothesis per sentence: each step feeds the last token of every unfinished sentence,
// lets `pick` choose the next one and drops sentences that emitted EOS or reached their maximum length.
// Hypothesis score = sum over chosen tokens of the processed log-prob (log_softmax of the raw logits,
// then the masks; a forced EOS contributes 0 as in HF beam search).
std::vector<SearchResult> one_path_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options, const TokenPicker& pick);

// Highest-scoring id of a row; the lowest id on exact ties (torch.argmax); -1 when no score is finite.
int32_t argmax_id(ScoreRow row);

// HF `_sample` with do_sample=False: argmax over the masked raw logits at every step.
std::vector<SearchResult> greedy_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                        const SearchOptions& options);

}  // namespace seqtrans
