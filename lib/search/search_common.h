// Pieces shared by the search algorithms (internal to lib/search): checking the model and its step
// output, and the per-sentence length limits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "search/options.h"
#include "search/step_model.h"

namespace seqtrans {

// Checks that the model's special ids fit its vocabulary.
void check_step_model(const StepModel& model);

// The step output as a host fp32 tensor, after checking that it is [slots, vocab].
Tensor host_logits(const Tensor& logits, int64_t slots, int64_t vocab);  // [slots, vocab]

// The model's suppressed ids without EOS (HF's NoBadWords processor never bans EOS).
std::vector<int32_t> suppressed_without_eos(const StepModel& model);

// The maximum generated length of a source of `source_length` ids, capped by the model's max_target_length().
int max_generated_length(const StepModel& model, const SearchOptions& options, size_t source_length);

// A hypothesis's decoder inputs so far, HF's input_ids: the start id, then its tokens.
std::vector<int32_t> decoder_history(int32_t start_id, const std::vector<int32_t>& tokens);

// A beam's tokens continued by one more: a child hypothesis's tokens.
std::vector<int32_t> extended(const std::vector<int32_t>& tokens, int32_t token);

// True when `sources` keeps every one of `slots` slots in place, so that select() can be skipped.
bool is_identity_selection(const std::vector<int32_t>& sources, int64_t slots);

}  // namespace seqtrans
