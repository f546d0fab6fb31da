#include "memory_budget.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"

namespace seqtrans {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Decoder steps the caches are sized for: outputs rarely pass 256 tokens; longer ones grow the pools.
constexpr size_t kReservedSteps = 256;
// Encoder activations live at once, per token and per element of d_model or the FFN width: the layer's
// input, its attention output, the residual sum and the FFN's hidden layer, each up to 4 wide.
constexpr size_t kEncoderBuffers = 4;
// Logits of the fused output layer: the step being computed, and one per recorded graph of the two row
// buckets a shrinking batch moves between, so three [rows, V] fp32 buffers.
constexpr size_t kLogitBuffers = 3;
// cuBLAS workspace, step inputs, tables and the arena's rounding.
constexpr size_t kFixedOverhead = 64 * kMiB;
// Of what the device has free, the share a run plans for: graphs, cuBLAS and fragmentation take the rest.
constexpr double kUsableShare = 0.9;

size_t weight_bytes(const ModelFile& file, DataType dtype) {
  const size_t element = dtype == DataType::F16 ? 2 : 4;
  size_t bytes = 0;
  for (const auto& [name, tensor] : file.tensors()) bytes += static_cast<size_t>(tensor.elements()) * element;
  return bytes;
}

double mebibytes(size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB); }

}  // namespace

size_t device_reservation(const ModelFile& file, const ReservationInputs& inputs) {
  const ModelConfig& config = file.config();
  const size_t element = inputs.dtype == DataType::F16 ? 2 : 4;
  const size_t slots = inputs.batching.max_batch_size * static_cast<size_t>(inputs.slots_per_sentence);
  const size_t steps = std::min<size_t>(config.max_positions, kReservedSteps);
  const size_t caches = 2 * slots * steps * config.d_model * element * config.decoder.num_layers;
  // A batch never holds more tokens than its sentence cap times the longest allowed source.
  const size_t batch_tokens =
      std::min(inputs.batching.max_batch_tokens, inputs.batching.max_batch_size * inputs.max_input_length);
  const size_t widest = std::max(config.encoder.ffn_dim, config.decoder.ffn_dim);
  const size_t encoder = batch_tokens * (4 * config.d_model + widest) * element * kEncoderBuffers;
  const size_t logits = slots * static_cast<size_t>(config.target_vocab_size) * sizeof(float);
  return weight_bytes(file, inputs.dtype) + caches + encoder + kLogitBuffers * logits + kFixedOverhead;
}

FittedBudget fit_budget_to_memory(const ModelFile& file, const ReservationInputs& inputs,
                                  const AvailableMemory& memory) {
  const std::string available = memory.capped ? fmt::format("the {:.0f} MiB of --max-gpu-memory", mebibytes(memory.bytes))
                                              : fmt::format("the {:.0f} MiB free", mebibytes(memory.bytes));
  const char* kind = memory.host ? "host memory" : "device memory";
  const size_t usable = static_cast<size_t>(static_cast<double>(memory.bytes) * kUsableShare);
  const BatchingOptions& asked = inputs.batching;
  ReservationInputs trial = inputs;
  // Sentences s of the budget, tokens lowered in proportion (at least one sentence's worth).
  const auto with_sentences = [&](size_t sentences) {
    BatchingOptions batching = asked;
    batching.max_batch_size = sentences;
    const double share = static_cast<double>(sentences) / static_cast<double>(asked.max_batch_size);
    batching.max_batch_tokens = std::max<size_t>(
        std::min(asked.max_batch_tokens, inputs.max_input_length),
        static_cast<size_t>(static_cast<double>(asked.max_batch_tokens) * share));
    batching.max_batch_tokens = std::min(batching.max_batch_tokens, asked.max_batch_tokens);
    return batching;
  };
  const auto fits = [&](const BatchingOptions& batching) {
    trial.batching = batching;
    return device_reservation(file, trial) <= usable;
  };
  FittedBudget fitted{asked, ""};
  if (fits(asked)) return fitted;
  SEQTRANS_CHECK(fits(with_sentences(1)),
                 "the model needs {:.0f} MiB of {} for one sentence, more than {}",
                 mebibytes(device_reservation(file, trial)), kind, available);
  size_t low = 1, high = asked.max_batch_size;  // fits(low), !fits(high)
  while (high - low > 1) {
    const size_t middle = low + (high - low) / 2;
    (fits(with_sentences(middle)) ? low : high) = middle;
  }
  fitted.batching = with_sentences(low);
  fitted.note = fmt::format(
      "note: the batch budget needs more {} than {}: --max-batch-size lowered from {} "
      "to {}, --max-batch-tokens from {} to {}",
      kind, available, asked.max_batch_size, fitted.batching.max_batch_size, asked.max_batch_tokens,
      fitted.batching.max_batch_tokens);
  return fitted;
}

}  // namespace seqtrans
