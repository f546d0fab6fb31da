// The encoder memory pool under iteration-level batching: when sentences leave holes too short for the
// ones that join, the runs in flight move to the front of the pool (chunk by chunk), and every sentence,
// moved or joining, decodes what it decodes in a pool with room to spare.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "support/gpu.h"
#include "support/random_models.h"

using namespace seqtrans;

namespace {

ModelFile random_model() { return testing::small_random_model(2, 2, 11); }

std::vector<int32_t> source(int length, int seed) {
  std::vector<int32_t> ids;
  for (int t = 0; t + 1 < length; ++t) ids.push_back(1 + (seed * 7 + t * 3) % 37);
  ids.push_back(0);  // EOS
  return ids;
}

// Logits of one decoder step from the start token, [slots, V], for the sentences in slot order.
std::vector<float> first_step(EncoderDecoderModel& model, DecoderState& state) {
  const std::vector<int32_t> inputs(static_cast<size_t>(state.slots()), model.decoder_start_id());
  return model.step(state, inputs).to(Device::CPU).to_float_vector();
}

struct PoolRun {
  std::vector<float> logits;
  int64_t compactions = 0;
};

// 96 sentences of 50 ids fill the first 4,800 positions of a pool of `pool_positions`; every other one
// leaves, so the 2,400 positions still in flight (more than one compaction chunk) sit between holes of 50.
// Then 12 sentences of 60 ids join: they fit in no hole, so without 720 free positions at the end the pool
// compacts. The same admissions either way: only where the memory sits differs.
PoolRun run(const ModelFile& file, const ModelOptions& options, int64_t pool_positions) {
  EncoderDecoderModel model(file, options);
  std::vector<std::vector<int32_t>> first;
  for (int i = 0; i < 96; ++i) first.push_back(source(50, i));
  std::vector<std::vector<int32_t>> joining;
  for (int i = 0; i < 12; ++i) joining.push_back(source(60, 100 + i));
  const std::unique_ptr<DecoderState> state = model.start();
  model.reserve(*state, DecoderReservation{120, 120, 60, pool_positions, 8});
  model.admit(*state, first);
  std::vector<int32_t> staying;
  for (int32_t i = 1; i < 96; i += 2) staying.push_back(i);
  model.select(*state, staying);
  model.admit(*state, joining);
  return PoolRun{first_step(model, *state), model.step_counts().memory_compactions};
}

void check_compaction(const ModelOptions& options) {
  const ModelFile file = random_model();
  const PoolRun roomy = run(file, options, 96 * 50 + 12 * 60);
  const PoolRun compacted = run(file, options, 96 * 50);
  CHECK(roomy.compactions == 0);
  CHECK(compacted.compactions == 1);
  REQUIRE(compacted.logits.size() == roomy.logits.size());
  CHECK(compacted.logits.size() == static_cast<size_t>((48 + 12) * 40));
  CHECK(compacted.logits == roomy.logits);  // the same kernels over the same keys: bit for bit
}

// Largest difference between a wave's first step and each of its sentences' first step alone (CPU).
double worst_against_alone(const ModelFile& file, const ModelOptions& options,
                           const std::vector<std::vector<int32_t>>& wave) {
  EncoderDecoderModel model(file, options);
  const std::unique_ptr<DecoderState> state = model.encode(wave);
  const std::vector<float> together = first_step(model, *state);
  EncoderDecoderModel cpu(file, ModelOptions{});
  std::vector<float> alone;
  for (const auto& sentence : wave) {
    const std::unique_ptr<DecoderState> single = cpu.encode({sentence});
    const std::vector<float> row = first_step(cpu, *single);
    alone.insert(alone.end(), row.begin(), row.end());
  }
  REQUIRE(together.size() == alone.size());
  double worst = 0.0;
  for (size_t i = 0; i < together.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(together[i]) - alone[i]));
  return worst;
}

// 180 sentences of 44 to 50 ids: 8,460 tokens, more than one encoder pass takes.
std::vector<std::vector<int32_t>> long_wave() {
  std::vector<std::vector<int32_t>> wave;
  for (int i = 0; i < 180; ++i) wave.push_back(source(50 - i % 7, i));
  return wave;
}

}  // namespace

TEST_CASE("the encoder memory pool compacts in chunks and the sentences decode as without it (CPU)", "[e2e][encoder]") {
  check_compaction(ModelOptions{});
}

TEST_CASE("the encoder memory pool compacts in chunks and the sentences decode as without it (GPU)",
          "[gpu][e2e][encoder]") {
  REQUIRE_GPU_OR_SKIP();
  for (const DataType dtype : {DataType::F32, DataType::F16}) {
    CAPTURE(dtype_name(dtype));
    check_compaction(ModelOptions{Device::CUDA, dtype});
  }
}

// Passes that put a sentence's keys at the wrong pool positions would change its logits by O(1); the
// tolerance only absorbs GEMMs over other row counts.
TEST_CASE("a wave longer than one encoder pass is encoded in several, and each sentence decodes as alone (CPU)",
          "[e2e][encoder]") {
  CHECK(worst_against_alone(random_model(), ModelOptions{}, long_wave()) < 1e-3);
}

TEST_CASE("a wave longer than one encoder pass is encoded in several, and each sentence decodes as alone (GPU)",
          "[gpu][e2e][encoder]") {
  REQUIRE_GPU_OR_SKIP();
  CHECK(worst_against_alone(random_model(), ModelOptions{Device::CUDA, DataType::F32}, long_wave()) < 1e-3);
}
