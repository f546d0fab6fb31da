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

// The token a path takes at one step and its processed log-prob (log_softmax of the raw logits, then the
// masks; a forced EOS contributes 0 as in HF beam search).
struct PathChoice {
  int32_t token = -1;
  float log_prob = 0.0f;
};

// Runs one decoding step: feeds `input_ids` ([slots]) and chooses the next token of every slot, whose
// sentences and positions are given per slot.
using StepChooser = std::function<void(DecoderState& state, const std::vector<int32_t>& input_ids,
                                       const std::vector<size_t>& sentences, const std::vector<RowPosition>& positions,
                                       std::vector<PathChoice>& choices)>;

// Decodes one hypothesis per sentence: each step feeds the last token of every unfinished sentence,
// lets `choose` pick the next ones and drops sentences that emitted EOS or reached their maximum length.
// Hypothesis score = sum of the chosen log-probs.
std::vector<SearchResult> one_path_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options, const StepChooser& choose);

// A chooser that reads full logits rows from StepModel::step and lets `pick` choose (sampling).
StepChooser logits_chooser(StepModel& model, const SearchOptions& options, const TokenPicker& pick);

// Highest-scoring id of a row; the lowest id on exact ties (torch.argmax); -1 when no score is finite.
int32_t argmax_id(ScoreRow row);

// HF `_sample` with do_sample=False: the argmax at every step, taken from the model's fused top-1
// (StepModel::step_candidates), so that only one value per slot leaves the device.
std::vector<SearchResult> greedy_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                        const SearchOptions& options);

}  // namespace seqtrans
