#include "search/greedy.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {

int32_t argmax_id(ScoreRow row) {
  int32_t best_id = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < row.vocab; ++id) {
    // Strictly greater keeps the lowest id among equal scores; -inf and NaN never win.
    if (row.values[id] > best_value) {
      best_value = row.values[id];
      best_id = static_cast<int32_t>(id);
    }
  }
  return best_id;
}

std::vector<SearchResult> one_path_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options, const TokenPicker& pick) {
  check_step_model(model);
  const int64_t vocab = model.target_vocab_size();
  const int32_t eos_id = model.eos_id();
  const std::vector<int> max_lengths = max_generated_lengths(model, sources, options);
  const LogitsProcessorChain mask_chain = make_mask_chain(model, options);
  const LogitsProcessorChain log_prob_chain = make_log_prob_chain(model, options);

  std::vector<SearchResult> results(sources.size());
  std::vector<Hypothesis> paths(sources.size());
  // Slot i of the decoder state decodes sentence active[i].
  std::vector<size_t> active(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) active[i] = i;
  std::vector<int32_t> input_ids(sources.size(), model.decoder_start_id());  // [slots]

  std::unique_ptr<DecoderState> state = model.encode(sources);
  std::vector<float> masked_scratch;    // [vocab]
  std::vector<float> log_prob_scratch;  // [vocab]
  while (!active.empty()) {
    const int64_t slots = static_cast<int64_t>(active.size());
    const Tensor logits = host_logits(model.step(*state, input_ids), slots, vocab);  // [slots, vocab]

    std::vector<int32_t> kept_slots;
    std::vector<size_t> kept_sentences;
    std::vector<int32_t> next_input_ids;
    for (int64_t slot = 0; slot < slots; ++slot) {
      const size_t sentence = active[slot];
      Hypothesis& path = paths[sentence];
      const RowPosition position{static_cast<int>(path.tokens.size()), max_lengths[sentence]};

      const int32_t token = pick(sentence, processed_row(logits, slot, mask_chain, position, masked_scratch), position);
      SEQTRANS_CHECK(token >= 0 && token < vocab, "sentence {}: no token has a finite score at step {}", sentence,
                     position.generated);
      const ScoreRow log_probs = processed_row(logits, slot, log_prob_chain, position, log_prob_scratch);
      SEQTRANS_CHECK(std::isfinite(log_probs.values[token]), "sentence {}: chosen token {} has log-prob {} at step {}",
                     sentence, token, log_probs.values[token], position.generated);
      path.score += log_probs.values[token];

      if (token == eos_id) {
        path.finished = true;
      } else {
        path.tokens.push_back(token);
        if (static_cast<int>(path.tokens.size()) >= max_lengths[sentence]) {
          path.finished = false;
        } else {
          kept_slots.push_back(static_cast<int32_t>(slot));
          kept_sentences.push_back(sentence);
          next_input_ids.push_back(token);
          continue;
        }
      }
      results[sentence].hypotheses.push_back(std::move(path));
    }

    if (kept_slots.empty()) break;
    // Finished sentences leave the batch at once so that no later step computes them.
    if (!is_identity_selection(kept_slots, slots)) model.select(*state, kept_slots);
    active = std::move(kept_sentences);
    input_ids = std::move(next_input_ids);
  }
  return results;
}

std::vector<SearchResult> greedy_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                        const SearchOptions& options) {
  validate_options(options);
  SEQTRANS_CHECK(options.num_hypotheses == 1, "greedy search returns 1 hypothesis, got num_hypotheses {}",
                 options.num_hypotheses);
  return one_path_search(model, sources, options,
                         [](size_t /*sentence*/, ScoreRow masked_logits, const RowPosition& /*position*/) {
                           return argmax_id(masked_logits);
                         });
}

}  // namespace seqtrans
