// Overlapped launches (cuda/kernels/launch.cuh) change when a kernel starts, never what it reads: a chain of
// ops, each reading what the one before it wrote, gives the bits of ordinary launches, launched one by one
// and replayed as a graph.
#include "catch.h"
#include "core/device.h"
#include "core/overlapped_launches.h"
#include "ops/graph.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

#ifdef SEQTRANS_WITH_CUDA

#include <vector>

#include "cuda/runtime/context.h"

using namespace seqtrans;
using seqtrans::testing::random_floats;
using seqtrans::testing::same_bits;

namespace {

Tensor device_half(const Shape& shape, float low, float high) {
  return random_floats(shape, low, high).to(DataType::F16).to(Device::CUDA);
}

// A pre-norm decoder layer's feed-forward and the logits after it, at NLLB's width: layer norm, a product
// with ReLU, a product with the residual, the layer norm folded into the logits' product, the top 4.
struct Chain {
  int64_t rows;
  Tensor x, gamma, beta, inner, inner_bias, outer, outer_bias, output;

  Chain(int64_t rows, int64_t width, int64_t hidden, int64_t vocab)
      : rows(rows),
        x(device_half({rows, width}, -1.0f, 1.0f)),
        gamma(device_half({width}, 0.5f, 1.5f)),
        beta(device_half({width}, -0.1f, 0.1f)),
        inner(device_half({hidden, width}, -0.05f, 0.05f)),
        inner_bias(device_half({hidden}, -0.1f, 0.1f)),
        outer(device_half({width, hidden}, -0.05f, 0.05f)),
        outer_bias(device_half({width}, -0.1f, 0.1f)),
        output(device_half({vocab, width}, -0.1f, 0.1f)) {}

  // Runs the ops into `results` (the hidden row, the top values and ids), allocating nothing else that
  // outlives them.
  void run(std::vector<Tensor>& results) const {
    const ops::LayerNormWeights norm{gamma, beta, 1e-5f};
    ops::MatmulOptions relu;
    relu.bias = &inner_bias;
    relu.activation = Activation::Relu;
    const Tensor hidden = ops::matmul(ops::layer_norm(x, norm), inner, relu);
    const Tensor stream = ops::matmul_bias_residual(hidden, outer, outer_bias, x);
    ops::MatmulOptions logits_options;
    logits_options.fp32_output = true;
    const Tensor logits = ops::layer_norm_matmul(stream, norm, output, logits_options);
    Tensor values({rows, 4}, DataType::F32, Device::CUDA), ids({rows, 4}, DataType::I32, Device::CUDA);
    ops::TopkOptions top;
    top.k = 4;
    ops::log_softmax_topk(logits, top, values, ids);
    results = {stream, values, ids};
  }
};

std::vector<Tensor> on_host(const std::vector<Tensor>& device) {
  std::vector<Tensor> host;
  for (const Tensor& t : device) host.push_back(t.to(Device::CPU));
  return host;
}

bool all_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("overlapped launches give the bits of ordinary launches, one by one and in a graph", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // 1 row: the CUDA-core small-rows products, their prologues and epilogues; 4 rows: the logits on tensor
  // cores; 32 rows: cuBLAS between the kernels of ours.
  for (int64_t rows : {1, 4, 32}) {
    CAPTURE(rows);
    const Chain chain(rows, 1024, 4096, 32000);
    cuda::synchronize();
    std::vector<Tensor> ordinary;
    {
      const OverlappedLaunchScope off(false);
      chain.run(ordinary);
    }
    const std::vector<Tensor> expected = on_host(ordinary);

    const OverlappedLaunchScope on(true);
    for (int repeat = 0; repeat < 5; ++repeat) {
      std::vector<Tensor> overlapped;
      chain.run(overlapped);
      CHECK(all_same_bits(on_host(overlapped), expected));
    }
    std::vector<Tensor> recorded;
    ops::DeviceGraph graph(Device::CUDA);
    graph.capture([&] { chain.run(recorded); });
    for (int replay = 0; replay < 5; ++replay) {
      graph.replay();
      CHECK(all_same_bits(on_host(recorded), expected));
    }
  }
}

#endif  // SEQTRANS_WITH_CUDA
