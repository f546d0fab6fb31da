#include "bench/prefill_stall.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

#include <fmt/format.h>

#include "models/decoder_only_model.h"
#include "scheduler/decoding_scheduler.h"

namespace seqtrans::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Rows decoding beside the long prompt: 7, so that they and the prompt's row share one graph bucket (8) and
// its joining records no graph inside the measurement.
constexpr size_t kDecodingRows = 7;
constexpr int kShortPrompt = 16;
constexpr int kRounds = 5;  // measured rounds a chunk size, after one to warm up

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<int32_t> random_prompt(const ModelConfig& config, int length, std::mt19937& random) {
  std::uniform_int_distribution<int32_t> token(3, static_cast<int32_t>(config.target_vocab_size) - 1);
  std::vector<int32_t> prompt{config.bos_id};
  while (static_cast<int>(prompt.size()) < length) prompt.push_back(token(random));
  return prompt;
}

struct RoundResult {
  double step_s = 0;      // a decoding step of the rows alone
  double stall_s = 0;     // the longest iteration while the long prompt was prefilled (rows wait that long)
  double prefill_s = 0;   // admission work for the long prompt (its chunks, or its whole prefill)
  double join_s = 0;      // from its arrival to its slot joining
  size_t chunks = 0;
};

// One round: the rows start decoding, then the long prompt arrives; every sentence generates `output` tokens.
RoundResult run_round(DecodingScheduler& scheduler, const std::vector<std::vector<int32_t>>& shorts,
                      const std::vector<int32_t>& long_prompt, uint64_t first_id) {
  std::vector<FinishedSentence> finished;
  for (size_t i = 0; i < shorts.size(); ++i) scheduler.submit(SessionSentence{first_id + i, shorts[i], i, {}});
  while (scheduler.state().admitting() > 0 || scheduler.waiting() > 0 || scheduler.state().slots() < 1)
    scheduler.iterate(finished);
  RoundResult result;
  // The rows alone: a few iterations of one step each.
  const size_t steps_before = scheduler.stats().steps;
  const Clock::time_point alone = Clock::now();
  for (int i = 0; i < 8; ++i) scheduler.iterate(finished);
  result.step_s = seconds_since(alone) / static_cast<double>(scheduler.stats().steps - steps_before);

  const double encode_before = scheduler.times().encode;
  const size_t chunks_before = scheduler.stats().admission_shares;
  const Clock::time_point arrival = Clock::now();
  scheduler.submit(SessionSentence{first_id + shorts.size(), long_prompt, shorts.size(), {}});
  const int64_t slots_before = scheduler.state().slots();
  while (scheduler.waiting() > 0 || scheduler.state().admitting() > 0) {
    const Clock::time_point start = Clock::now();
    scheduler.iterate(finished);
    result.stall_s = std::max(result.stall_s, seconds_since(start));
  }
  result.join_s = seconds_since(arrival);
  SEQTRANS_CHECK(scheduler.state().slots() == slots_before + 1, "prefill stall: the long prompt did not join");
  result.prefill_s = scheduler.times().encode - encode_before;
  result.chunks = scheduler.stats().admission_shares - chunks_before;
  while (!scheduler.idle()) scheduler.iterate(finished);
  return result;
}

// Each field's median over the rounds.
RoundResult median_round(std::vector<RoundResult> rounds) {
  const auto median = [&](double RoundResult::*field) {
    std::sort(rounds.begin(), rounds.end(), [field](const RoundResult& a, const RoundResult& b) {
      return a.*field < b.*field;
    });
    return rounds[rounds.size() / 2].*field;
  };
  RoundResult result;
  result.step_s = median(&RoundResult::step_s);
  result.stall_s = median(&RoundResult::stall_s);
  result.prefill_s = median(&RoundResult::prefill_s);
  result.join_s = median(&RoundResult::join_s);
  result.chunks = rounds.front().chunks;
  return result;
}

}  // namespace

void run_prefill_stall(const ModelFile& file, const PrefillStallOptions& options, std::ostream& out) {
  const ModelConfig& config = file.config();
  SEQTRANS_CHECK(config.kind == ModelKind::DecoderOnly, "--prefill-stall measures a decoder-only model: give -m with "
                 "one (models/llama-demo-en-de.seqtrans) or --synthetic --preset tinyllama-1.1b");
  const int prompt_length = options.prompt_tokens > 0 ? options.prompt_tokens : config.max_positions / 2;
  // The rows keep decoding well past the long prompt's prefill, at the smallest chunk too.
  const int output = std::min(config.max_positions - prompt_length - 1, 160);
  SEQTRANS_CHECK(output > 16, "--prefill-stall: a {}-token prompt leaves too few of the model's {} positions", prompt_length,
                 config.max_positions);
  std::mt19937 random(1);
  std::vector<std::vector<int32_t>> shorts;
  for (size_t i = 0; i < kDecodingRows; ++i) shorts.push_back(random_prompt(config, kShortPrompt, random));
  const std::vector<int32_t> long_prompt = random_prompt(config, prompt_length, random);

  SearchOptions search;
  search.beam_size = 1;
  search.min_length = output;
  search.max_length_a = output;
  search.max_length_b = 0.0f;
  SchedulerOptions scheduling;
  scheduling.max_sentences = kDecodingRows + 1;
  scheduling.min_join = 1;

  out << fmt::format("prefill chunks: {} rows decoding, a {}-token prompt joining; {} fp{}\n", kDecodingRows,
                     prompt_length, device_name(options.device), options.dtype == DataType::F16 ? 16 : 32);
  out << fmt::format("{:>6} {:>8} {:>9} {:>12} {:>14} {:>9} {:>8}\n", "chunk", "step ms", "stall ms", "stall/step",
                     "prefill tok/s", "join ms", "chunks");
  for (const int64_t chunk : {int64_t{0}, int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256},
                              int64_t{512}, int64_t{1024}, int64_t{2048}, int64_t{0}}) {
    ModelOptions model_options{options.device, options.dtype, {}};
    model_options.tuning.prefill_chunk_tokens = chunk;
    // Every iteration one step (a GPU otherwise runs several greedy steps at once once nothing waits to join,
    // the iteration the prompt joins among them): the stall is then one step and one chunk.
    model_options.tuning.steps_per_read = 1;
    DecoderOnlyModel model(file, model_options);
    DecodingScheduler scheduler(model, search, scheduling);
    // Pools with room for the long prompt beside the rows (it waits otherwise): the model expects outputs
    // as long as their prompts.
    DecoderReservation reservation;
    reservation.sentences = reservation.slots = static_cast<int64_t>(kDecodingRows) + 1;
    reservation.source_length = prompt_length;
    reservation.source_tokens = 2 * (prompt_length + static_cast<int64_t>(kDecodingRows) * kShortPrompt);
    model.reserve(scheduler.state(), reservation);
    // The first round sizes the pools and records the graphs; the median of the next kRounds is reported.
    run_round(scheduler, shorts, long_prompt, 0);
    std::vector<RoundResult> rounds;
    for (int i = 1; i <= kRounds; ++i) rounds.push_back(run_round(scheduler, shorts, long_prompt, 100 * i));
    const RoundResult round = median_round(rounds);
    out << fmt::format("{:>6} {:>8.2f} {:>9.2f} {:>12.1f} {:>14.0f} {:>9.1f} {:>8}\n", chunk, 1e3 * round.step_s,
                       1e3 * round.stall_s, round.stall_s / round.step_s, prompt_length / round.prefill_s,
                       1e3 * round.join_s, round.chunks);
    out.flush();
  }
}

}  // namespace seqtrans::bench
