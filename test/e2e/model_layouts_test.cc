// The layouts other families than Marian need, on random models, GPU against the CPU reference (fp32:
// identical tokens; fp16: most of them): pre-norm stacks with final norms and M2M-100's sinusoids from
// position 2 (NLLB-200, M2M-100), and mBART's learned positions with offset 2 and its embedding norm.
// Golden parity with Hugging Face for the real families is in golden_parity_test.cc.
#include <iostream>
#include <string>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "models/tensor_specs.h"
#include "support/gpu.h"
#include "support/search_runs.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

// Pre-norm stacks with final norms, as both families have; `mbart` adds the embedding norm and learned
// positions, otherwise M2M-100's sinusoids.
ModelFile family_model(bool mbart) {
  ModelConfig config = transformer_base_config();
  config.d_model = 32;
  config.encoder = {2, 4, 64, /*pre_norm=*/true, /*final_layer_norm=*/true, /*embedding_layer_norm=*/mbart};
  config.decoder = config.encoder;
  config.activation = mbart ? Activation::Gelu : Activation::Relu;
  config.source_vocab_size = config.target_vocab_size = 40;
  config.pad_id = 1;
  config.eos_id = config.decoder_start_id = 2;
  config.position_encoding = mbart ? PositionEncoding::Learned : PositionEncoding::SinusoidalFairseq;
  config.position_offset = 2;
  config.max_positions = 64;
  config.output_bias = mbart;
  config.suppressed_ids = {1};  // pad
  return make_random_model(config, {mbart ? 7u : 8u, 0.4f});
}

// Sources of 1 to 30 ids in [3, 40), EOS (2) last.
std::vector<std::vector<int32_t>> random_sources(size_t count) {
  std::vector<std::vector<int32_t>> sources;
  uint32_t state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    std::vector<int32_t> source(1 + (state >> 8) % 30);
    for (int32_t& id : source) {
      state = state * 1664525u + 1013904223u;
      id = static_cast<int32_t>(3 + (state >> 8) % 37);
    }
    source.push_back(2);
    sources.push_back(source);
  }
  return sources;
}

}  // namespace

TEST_CASE("pre-norm layouts (M2M-100/NLLB sinusoids, mBART learned positions) run on the CPU", "[e2e]") {
  for (const bool mbart : {false, true}) {
    CAPTURE(mbart);
    const ModelFile file = family_model(mbart);
    EncoderDecoderModel model(file, ModelOptions{Device::CPU, DataType::F32});
    const std::vector<SearchResult> results = search_in_batches(model, random_sources(12), 4, 5);
    REQUIRE(results.size() == 12);
    for (const SearchResult& result : results) CHECK(!result.hypotheses.empty());
  }
}

TEST_CASE("pre-norm layouts on the GPU equal the CPU (fp32) and mostly agree in fp16", "[gpu][e2e]") {
  REQUIRE_GPU_OR_SKIP();
  const std::vector<std::vector<int32_t>> sources = random_sources(60);
  for (const bool mbart : {false, true}) {
    const ModelFile file = family_model(mbart);
    EncoderDecoderModel cpu(file, ModelOptions{Device::CPU, DataType::F32});
    for (const int beam : {1, 4}) {
      const std::vector<SearchResult> expected = search_in_batches(cpu, sources, beam, 16);
      for (const DataType dtype : {DataType::F32, DataType::F16}) {
        for (const size_t batch : {size_t{1}, size_t{16}}) {
          EncoderDecoderModel gpu(file, ModelOptions{Device::CUDA, dtype});
          const std::vector<SearchResult> actual = search_in_batches(gpu, sources, beam, batch);
          const auto [identical, max_difference] = compare_best(actual, expected);
          std::cout << fmt::format("{} layout, beam {}, {}, batches of {}: {}/{} identical to the CPU, scores within "
                                   "{:.1e}\n",
                                   mbart ? "mBART" : "M2M-100", beam, dtype_name(dtype), batch, identical,
                                   actual.size(), max_difference);
          if (dtype == DataType::F32) {
            CHECK(identical == actual.size());
            // Summed log-probs of up to 80 tokens of a random model with large weights: H100, 1.3e-4 at most.
            CHECK(max_difference <= 5e-4);
          } else {
            CHECK(identical >= actual.size() * 9 / 10);
          }
        }
      }
    }
  }
}
