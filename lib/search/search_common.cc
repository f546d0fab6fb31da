#include "search/search_common.h"

#include <algorithm>

#include "core/error.h"
#include "search/search.h"

namespace seqtrans {

void check_step_model(const StepModel& model) {
  const int64_t vocab = model.target_vocab_size();
  SEQTRANS_CHECK(vocab > 0, "step model has an empty target vocabulary");
  SEQTRANS_CHECK(model.eos_id() >= 0 && model.eos_id() < vocab, "step model EOS id {} is outside the vocabulary of {}",
                 model.eos_id(), vocab);
  SEQTRANS_CHECK(model.decoder_start_id() >= 0 && model.decoder_start_id() < vocab,
                 "step model decoder start id {} is outside the vocabulary of {}", model.decoder_start_id(), vocab);
  for (int32_t id : model.suppressed_ids()) {
    SEQTRANS_CHECK(id >= 0 && id < vocab, "step model suppressed id {} is outside the vocabulary of {}", id, vocab);
  }
}

Tensor host_logits(const Tensor& logits, int64_t slots, int64_t vocab) {
  SEQTRANS_CHECK(logits.defined() && logits.rank() == 2 && logits.dim(0) == slots && logits.dim(1) == vocab,
                 "step returned logits of shape {}, expected [{}, {}]",
                 logits.defined() ? shape_string(logits.shape()) : "(undefined)", slots, vocab);
  Tensor host = logits.device() == Device::CPU ? logits : logits.to(Device::CPU);
  return host.to(DataType::F32);
}

std::vector<int32_t> suppressed_without_eos(const StepModel& model) {
  std::vector<int32_t> suppressed;
  for (int32_t id : model.suppressed_ids())
    if (id != model.eos_id()) suppressed.push_back(id);
  return suppressed;
}

int max_generated_length(const StepModel& model, const SearchOptions& options, size_t source_length) {
  return std::max(1, std::min(model.max_target_length(source_length), max_generated_length(options, source_length)));
}

std::vector<int32_t> decoder_history(int32_t start_id, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> history;
  history.reserve(tokens.size() + 1);
  history.push_back(start_id);
  history.insert(history.end(), tokens.begin(), tokens.end());
  return history;
}

std::vector<int32_t> extended(const std::vector<int32_t>& tokens, int32_t token) {
  std::vector<int32_t> longer;
  longer.reserve(tokens.size() + 1);
  longer = tokens;
  longer.push_back(token);
  return longer;
}

bool is_identity_selection(const std::vector<int32_t>& sources, int64_t slots) {
  if (static_cast<int64_t>(sources.size()) != slots) return false;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i] != static_cast<int32_t>(i)) return false;
  }
  return true;
}

}  // namespace seqtrans
