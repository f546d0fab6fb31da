// The batch budget against device memory: a budget the device cannot hold is lowered, by the largest
// factor that fits, instead of failing to start.
#include "catch.h"
#include "memory_budget.h"
#include "support/model_builder.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

ModelFile tiny_model_file() {
  const std::string path = temp_path("memory_budget") + ".seqtrans";
  write_model_file(path, make_tiny_model({}));
  return ModelFile::open(path);
}

ReservationInputs inputs_with(size_t sentences, size_t tokens) {
  ReservationInputs inputs;
  inputs.batching.max_batch_size = sentences;
  inputs.batching.max_batch_tokens = tokens;
  inputs.max_input_length = 64;
  return inputs;
}

}  // namespace

TEST_CASE("memory budget: a budget that fits is kept, silently", "[memory_budget]") {
  const ModelFile file = tiny_model_file();
  const ReservationInputs inputs = inputs_with(64, 4096);
  const size_t needed = device_reservation(file, inputs);
  const FittedBudget fitted = fit_budget_to_memory(file, inputs, {needed * 2});
  CHECK(fitted.note.empty());
  CHECK(fitted.batching.max_batch_size == 64);
  CHECK(fitted.batching.max_batch_tokens == 4096);
}

TEST_CASE("memory budget: a huge budget is lowered to the largest that fits, with a note", "[memory_budget]") {
  const ModelFile file = tiny_model_file();
  const ReservationInputs huge = inputs_with(1000000, 50000000);
  const size_t available = size_t{2} << 30;  // 2 GiB
  REQUIRE(device_reservation(file, huge) > available);  // terabytes, as the example
  const FittedBudget fitted = fit_budget_to_memory(file, huge, {available});
  CHECK(fitted.note.find("--max-batch-size lowered from 1000000 to") != std::string::npos);
  const size_t sentences = fitted.batching.max_batch_size;
  CHECK(sentences > 1);
  CHECK(sentences < 1000000);
  CHECK(fitted.batching.max_batch_tokens < 50000000);
  CHECK(fitted.batching.max_batch_tokens >= 64);  // at least one longest sentence
  // It fits in 90% of what is free, and one more sentence would not.
  ReservationInputs lowered = huge;
  lowered.batching = fitted.batching;
  CHECK(device_reservation(file, lowered) <= available * 9 / 10);
  lowered.batching.max_batch_size = sentences + 1;
  lowered.batching.max_batch_tokens = fitted.batching.max_batch_tokens * (sentences + 1) / sentences;
  CHECK(device_reservation(file, lowered) > available * 9 / 10);
}

TEST_CASE("memory budget: a device that cannot hold one sentence is a one-line error", "[memory_budget]") {
  const ModelFile file = tiny_model_file();
  try {
    fit_budget_to_memory(file, inputs_with(64, 4096), {1 << 20});
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("for one sentence") != std::string::npos);
    CHECK(message.find("MiB free") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("memory budget: under --max-gpu-memory the messages name the cap", "[memory_budget]") {
  const ModelFile file = tiny_model_file();
  const FittedBudget fitted = fit_budget_to_memory(file, inputs_with(1000000, 50000000), {size_t{2} << 30, /*capped=*/true});
  CHECK(fitted.note.find("than the 2048 MiB of --max-gpu-memory: --max-batch-size lowered") != std::string::npos);
  try {
    fit_budget_to_memory(file, inputs_with(64, 4096), {1 << 20, /*capped=*/true});
    FAIL("expected an error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("more than the 1 MiB of --max-gpu-memory") != std::string::npos);
  }
}

TEST_CASE("memory budget: the CPU backend's budget is fitted to host memory, named so", "[memory_budget]") {
  const ModelFile file = tiny_model_file();
  AvailableMemory host;
  host.bytes = size_t{2} << 30;
  host.host = true;
  const FittedBudget fitted = fit_budget_to_memory(file, inputs_with(1000000, 50000000), host);
  CHECK(fitted.note.find("needs more host memory than the 2048 MiB free") != std::string::npos);
  CHECK(fitted.batching.max_batch_size < 1000000);
}
