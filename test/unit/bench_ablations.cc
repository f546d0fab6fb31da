// Which ablations `seqtrans bench --ablations` measures: the forced hierarchical top-k only where the GPU's
// group filter takes the vocabulary (NLLB's 256,206 ids included), so that no point stops the run.
#include "bench/ablations.h"

#include <algorithm>

#include "catch.h"

namespace seqtrans::bench {
namespace {

bool measures_hierarchical(Device device, int64_t target_vocab) {
  const std::vector<Ablation> list = ablations(EngineSettings{}, device, Workload::SyntheticBatch, target_vocab);
  return std::any_of(list.begin(), list.end(),
                     [](const Ablation& ablation) { return ablation.name == "no-hierarchical-topk"; });
}

}  // namespace

TEST_CASE("bench ablations: the hierarchical top-k only at vocabularies its group filter takes", "[bench]") {
  CHECK(measures_hierarchical(Device::CUDA, 32000));
  CHECK(measures_hierarchical(Device::CUDA, 256206));  // NLLB-200
  CHECK(measures_hierarchical(Device::CUDA, 262144));
  CHECK_FALSE(measures_hierarchical(Device::CUDA, 262145));
  CHECK_FALSE(measures_hierarchical(Device::CUDA, 100));  // fewer groups than the k beam search may ask for
  CHECK(measures_hierarchical(Device::CPU, 100));          // the CPU scans whatever is asked
  CHECK(measures_hierarchical(Device::CPU, 1000000));
}

}  // namespace seqtrans::bench
