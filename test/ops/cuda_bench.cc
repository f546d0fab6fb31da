// Micro-benchmarks of the key kernels, timed with CUDA events (median of many runs after a warm-up).
// Hidden, and a no-op unless SEQTRANS_CUDA_BENCH is set (Catch2 v2 still runs hidden cases under a negated
// filter such as "~[gpu]"); scripts/gpu_check.sh kernels runs them with SEQTRANS_CUDA_BENCH=1 "[cuda_bench]".
#include "catch.h"
#include "support/gpu.h"

#ifdef SEQTRANS_WITH_CUDA

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/overlapped_launches.h"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"
#include "ops/graph.h"
#include "ops/ops.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;

namespace {

// Median time of `body` in microseconds: 10 warm-up runs, then 100 runs each between two events.
double median_microseconds(const std::function<void()>& body) {
  const cudaStream_t stream = cuda::current_stream();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 10; ++i) body();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int i = 0; i < 100; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float milliseconds = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));
    times.push_back(1000.0 * milliseconds);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Time per call of `body` recorded `calls` times into one CUDA graph, as the decoder step runs: the host's
// launch latency is hidden and the kernels run back to back.
double graph_microseconds_per_call(const std::function<void()>& body, int calls = 20) {
  ops::DeviceGraph graph(Device::CUDA);
  graph.capture([&] {
    for (int i = 0; i < calls; ++i) body();
  });
  return median_microseconds([&] { graph.replay(); }) / calls;
}

Tensor device_floats(const Shape& shape, DataType dtype, float low = -1.0f, float high = 1.0f) {
  return ops::convert(random_floats(shape, low, high).to(Device::CUDA), dtype);
}

// One table row: what ran, its median time and the bandwidth its minimum traffic implies.
void report(const std::string& name, double microseconds, double bytes) {
  std::printf("%-58s %10.2f us %9.1f GB/s\n", name.c_str(), microseconds, bytes / (microseconds * 1e3));
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("cuda kernel micro-benchmarks", "[.][cuda_bench]") {
  if (std::getenv("SEQTRANS_CUDA_BENCH") == nullptr || !testing::gpu_available()) return;
  const cudaDeviceProp& properties = cuda::context().properties;
  std::printf("device: %s, %d SMs, %.0f MiB L2\n", properties.name, properties.multiProcessorCount,
              properties.l2CacheSize / 1048576.0);
  std::printf("%-58s %13s %14s\n", "kernel", "median", "min traffic");

  for (DataType dtype : {DataType::F16, DataType::F32}) {
    const char* type = dtype_name(dtype);
    const double element = static_cast<double>(dtype_size(dtype));
    // Decoder self-attention step: 64 sentences x beam 5, d 512, 8 heads, cache capacity 256, ~100 keys.
    {
      const int64_t slots = 320, capacity = 256, d = 512;
      const Tensor query = device_floats({slots, 1, d}, dtype);
      const Tensor keys = device_floats({slots, capacity, d}, dtype);
      const Tensor values = device_floats({slots, capacity, d}, dtype);
      const Tensor lengths = random_ints({slots}, 90, 110).to(Device::CUDA);
      const double bytes = 2.0 * slots * 100 * d * element;
      const double time = median_microseconds([&] { ops::attention(query, keys, values, lengths, {8, 0.125f}); });
      report(std::string("attention decode step 320 slots x ~100 keys d512 h8 ") + type, time, bytes);
    }
    // The same step reading each key through a history table of random rows (beams reordered many times),
    // then the fused append that feeds it.
    {
      const int64_t slots = 320, capacity = 256, d = 512;
      const Tensor query = device_floats({slots, 1, d}, dtype);
      Tensor keys = device_floats({slots, capacity, d}, dtype);
      Tensor values = device_floats({slots, capacity, d}, dtype);
      const Tensor lengths = random_ints({slots}, 90, 110).to(Device::CUDA);
      Tensor history = random_ints({slots, capacity}, 0, static_cast<int32_t>(slots - 1)).to(Device::CUDA);
      ops::AttentionOptions options{8, 0.125f};
      options.key_rows = &history;
      const double time = median_microseconds([&] { ops::attention(query, keys, values, lengths, options); });
      report(std::string("attention decode step, key_rows [b, tk] random rows ") + type, time,
             2.0 * slots * 100 * d * element);
      const Tensor qkv = device_floats({slots, 3 * d}, dtype), bias = device_floats({3 * d}, dtype);
      const Tensor positions = random_ints({slots}, 90, 110).to(Device::CUDA);
      const double step_bytes = 2.0 * slots * 3 * d * element;  // read qkv, write query, key and value rows
      const double fused = median_microseconds(
          [&] { ops::append_self_attention_step(qkv, bias, positions, keys, values, history); });
      report(std::string("append_self_attention_step 320 x 512 ") + type, fused, step_bytes);
    }
    // Cross-attention step: 5 beams of each of 64 sentences share its memory of ~100 tokens (key_rows [b]).
    {
      const int64_t slots = 320, sentences = 64, source_len = 100, d = 512;
      const Tensor query = device_floats({slots, 1, d}, dtype);
      const Tensor keys = device_floats({sentences, source_len, d}, dtype);
      const Tensor values = device_floats({sentences, source_len, d}, dtype);
      const Tensor lengths = random_ints({slots}, 80, 100).to(Device::CUDA);
      std::vector<int32_t> rows;
      for (int64_t s = 0; s < slots; ++s) rows.push_back(static_cast<int32_t>(s / 5));
      const Tensor sentence_rows = Tensor::from_ints({slots}, rows).to(Device::CUDA);
      ops::AttentionOptions options{8, 0.125f};
      options.key_rows = &sentence_rows;
      const double time = median_microseconds([&] { ops::attention(query, keys, values, lengths, options); });
      report(std::string("attention cross step 320 slots on 64 memories, key_rows [b] ") + type, time,
             2.0 * sentences * source_len * d * element);
    }
    // Decoder steps of batch 128 x beam 4 (512 slots) and of batch 1 x beam 4, d 512, 8 heads of 64:
    // self-attention through a history table of random rows over a cache of the first capacity (32), with
    // 16 or 32 keys; cross-attention onto each sentence's memory of 32 source tokens (key_rows [b]).
    for (int64_t slots : {512, 4}) {
      const int64_t capacity = 32, d = 512;
      const Tensor query = device_floats({slots, 1, d}, dtype);
      const Tensor keys = device_floats({slots, capacity, d}, dtype);
      const Tensor values = device_floats({slots, capacity, d}, dtype);
      const Tensor history = random_ints({slots, capacity}, 0, static_cast<int32_t>(slots - 1)).to(Device::CUDA);
      ops::AttentionOptions options{8, 0.125f};
      options.key_rows = &history;
      for (int32_t keys_per_row : {16, 32}) {
        const Tensor lengths = random_ints({slots}, keys_per_row, keys_per_row).to(Device::CUDA);
        const auto call = [&] { ops::attention(query, keys, values, lengths, options); };
        const std::string name = "attention self step " + std::to_string(slots) + " slots x " +
                                 std::to_string(keys_per_row) + " keys, key_rows [b, tk] " + type;
        const double bytes = 2.0 * slots * keys_per_row * d * element;
        report(name, median_microseconds(call), bytes);
        report(name + ", in a graph", graph_microseconds_per_call(call), bytes);
      }
      const int64_t sentences = slots / 4, source_len = 32;
      const Tensor memory_keys = device_floats({sentences, source_len, d}, dtype);
      const Tensor memory_values = device_floats({sentences, source_len, d}, dtype);
      const Tensor source_lengths = random_ints({slots}, 32, 32).to(Device::CUDA);
      std::vector<int32_t> rows;
      for (int64_t s = 0; s < slots; ++s) rows.push_back(static_cast<int32_t>(s / 4));
      const Tensor sentence_rows = Tensor::from_ints({slots}, rows).to(Device::CUDA);
      ops::AttentionOptions cross_options{8, 0.125f};
      cross_options.key_rows = &sentence_rows;
      const auto call = [&] { ops::attention(query, memory_keys, memory_values, source_lengths, cross_options); };
      const std::string name = "attention cross step " + std::to_string(slots) + " slots on " +
                               std::to_string(sentences) + " x 32 keys, key_rows [b] " + type;
      const double bytes = 2.0 * sentences * source_len * d * element;
      report(name, median_microseconds(call), bytes);
      report(name + ", in a graph", graph_microseconds_per_call(call), bytes);
    }
    // Few units over long keys: 4 slots, ~300 of 512 positions.
    {
      const int64_t slots = 4, capacity = 512, d = 512;
      const Tensor query = device_floats({slots, 1, d}, dtype);
      const Tensor keys = device_floats({slots, capacity, d}, dtype);
      const Tensor values = device_floats({slots, capacity, d}, dtype);
      const Tensor lengths = random_ints({slots}, 290, 310).to(Device::CUDA);
      const auto call = [&] { ops::attention(query, keys, values, lengths, {8, 0.125f}); };
      const std::string name = std::string("attention decode step 4 slots x ~300 keys d512 h8 ") + type;
      report(name, median_microseconds(call), 2.0 * slots * 300 * d * element);
      report(name + ", in a graph", graph_microseconds_per_call(call), 2.0 * slots * 300 * d * element);
    }
    // Encoder self-attention, [b, t, d] (sentences of t - 20 to t tokens): Transformer-base's shape and
    // NLLB-600M's at 128 sentences of 350 tokens (16 heads of 64).
    const auto encoder_attention = [&](int64_t batch, int64_t time_steps, int64_t d, int heads) {
      const Tensor q = device_floats({batch, time_steps, d}, dtype);
      const Tensor k = device_floats({batch, time_steps, d}, dtype);
      const Tensor v = device_floats({batch, time_steps, d}, dtype);
      const Tensor lengths =
          random_ints({batch}, static_cast<int32_t>(time_steps - 20), static_cast<int32_t>(time_steps)).to(Device::CUDA);
      const double bytes = 4.0 * batch * time_steps * d * element;
      const double time = median_microseconds([&] { ops::attention(q, k, v, lengths, {heads, 0.125f}); });
      report(fmt::format("attention encoder {} x {} tokens d{} h{} {}", batch, time_steps, d, heads, type), time,
             bytes);
    };
    encoder_attention(32, 100, 512, 8);
    encoder_attention(128, 350, 1024, 16);
    // Fused bias + residual + layer norm, decoder step and encoder batch sizes.
    for (int64_t rows : {320, 3200}) {
      const int64_t d = 512;
      const Tensor x = device_floats({rows, d}, dtype), residual = device_floats({rows, d}, dtype);
      const Tensor bias = device_floats({d}, dtype), gamma = device_floats({d}, dtype), beta = device_floats({d}, dtype);
      const double bytes = 3.0 * rows * d * element;
      const double time = median_microseconds(
          [&] { ops::add_bias_residual_layer_norm(x, bias, residual, {gamma, beta, 1e-5f}); });
      report("add_bias_residual_layer_norm " + std::to_string(rows) + " x 512 " + type, time, bytes);
    }
    // Output layer: 512 rows (e.g. 64 sentences x beam 8) over a 32000 vocabulary.
    {
      const int64_t rows = 512, vocab = 32000;
      const Tensor logits = device_floats({rows, vocab}, dtype, -8.0f, 8.0f);
      const Tensor bias = device_floats({vocab}, dtype);
      const double bytes = rows * vocab * element;
      using A = ops::TopkAlgorithm;
      const std::pair<A, const char*> algorithms[] = {{A::FullScan, "radix"}, {A::Hierarchical, "group"}};
      for (int k : {1, 10, 64})
        for (const auto& [algorithm, name] : algorithms) {
          if (k == 1 && algorithm == A::Hierarchical) continue;  // k = 1 is the argmax kernel either way
          Tensor values({rows, k}, DataType::F32, Device::CUDA), indices({rows, k}, DataType::I32, Device::CUDA);
          ops::TopkOptions options;
          options.k = k;
          options.bias = &bias;
          options.algorithm = algorithm;
          const double time = median_microseconds(
              [&] { cuda::log_softmax_topk(logits, options, values, indices, cuda::current_stream()); });
          report(std::string("log_softmax_topk 512 x 32000 k=") + std::to_string(k) + " " +
                     (k == 1 ? "argmax" : name) + " " + type,
                 time, bytes);
        }
    }
    // The output layer of small steps: beam 4 over 1, 4 and 16 sentences (k = 8), as graph nodes.
    for (int64_t rows : {4, 16, 64}) {
      const int64_t vocab = 32000;
      const Tensor logits = device_floats({rows, vocab}, dtype, -8.0f, 8.0f);
      Tensor values({rows, 8}, DataType::F32, Device::CUDA), indices({rows, 8}, DataType::I32, Device::CUDA);
      ops::TopkOptions options;
      options.k = 8;
      const double time = graph_microseconds_per_call(
          [&] { cuda::log_softmax_topk(logits, options, values, indices, cuda::current_stream()); });
      report("log_softmax_topk " + std::to_string(rows) + " x 32000 k=8 in a graph " + type, time,
             static_cast<double>(rows * vocab * element));
    }
    // The output layer's product of small steps: 1 to 16 rows onto a 32,000 vocabulary (fp32 logits), as
    // graph nodes (fp16 weights only: once).
    for (int64_t rows : {1, 2, 4, 8, 16}) {
      if (dtype != DataType::F16) break;
      const int64_t k = 512, n = 32000;
      const Tensor a = device_floats({rows, k}, DataType::F16), b = device_floats({n, k}, DataType::F16);
      ops::MatmulOptions options;
      options.fp32_output = true;
      const double time = graph_microseconds_per_call([&] { ops::matmul(a, b, options); });
      report("matmul " + std::to_string(rows) + " x 512 x 32000 fp16 -> fp32 logits, in a graph", time,
             static_cast<double>(n * k * 2));
    }
    // A GEMM of the encoder's feed-forward layer, for scale.
    {
      const int64_t m = 3200, k = 512, n = 2048;
      const Tensor a = device_floats({m, k}, dtype), b = device_floats({n, k}, dtype);
      const double time = median_microseconds([&] { ops::matmul(a, b); });
      std::printf("%-58s %10.2f us %9.1f TFLOP/s\n", (std::string("matmul 3200x512 x 512x2048 ") + type).c_str(), time,
                  2.0 * m * n * k / (time * 1e6));
    }
  }
  const cuda::MemoryStats stats = cuda::memory_stats();
  std::printf("arena: %lld cudaMalloc calls, %.1f MiB reserved, peak %.1f MiB in use\n",
              static_cast<long long>(stats.cuda_malloc_calls), stats.bytes_reserved / 1048576.0,
              stats.peak_bytes_in_use / 1048576.0);
}

// A decoder step's products at a few rows, as graph nodes, each call on its own copy of the weight so that
// the weights stream from memory as in a step (16 copies exceed L2): the small-rows kernels' share of the
// memory bandwidth at the NLLB-600M and TinyLlama shapes.
TEST_CASE("small-rows products at the decoder shapes", "[.][cuda_bench][small-rows]") {
  if (std::getenv("SEQTRANS_CUDA_BENCH") == nullptr || !testing::gpu_available()) return;
  struct ProductShape {
    const char* name;
    int64_t n, k;
  };
  const ProductShape shapes[] = {{"nllb qkv", 3072, 1024},       {"nllb out", 1024, 1024},
                                 {"nllb ffn in", 4096, 1024},    {"nllb ffn out", 1024, 4096},
                                 {"tinyllama qkv", 2560, 2048},  {"tinyllama out", 2048, 2048},
                                 {"tinyllama gate+up", 11264, 2048}, {"tinyllama down", 2048, 5632}};
  constexpr int kCopies = 16;
  for (const ProductShape& shape : shapes) {
    std::vector<Tensor> weights;
    for (int i = 0; i < kCopies; ++i) weights.push_back(device_floats({shape.n, shape.k}, DataType::F16));
    for (const int64_t rows : {1, 4})
      for (const bool overlapped : {false, true}) {  // as ops called on their own launch, and as the engine does
        const OverlappedLaunchScope mode(overlapped);
        const Tensor a = device_floats({rows, shape.k}, DataType::F16);
        int call = 0;
        const double time = graph_microseconds_per_call([&] { ops::matmul(a, weights[call++ % kCopies]); }, kCopies);
        report(fmt::format("{} {} x {} x {}{}", shape.name, rows, shape.k, shape.n, overlapped ? " overlapped" : ""),
               time, static_cast<double>(shape.n * shape.k * 2));
      }
  }
}

// The two ceilings `seqtrans bench` divides by (docs/BENCHMARKS.md, "Hardware ceilings"): a large cuBLAS
// fp16 GEMM, and a device-to-device copy counting the bytes read plus the bytes written. Both far exceed the
// L2 cache, so repeated runs do not measure it.
TEST_CASE("hardware ceilings: fp16 GEMM rate and device copy bandwidth", "[.][cuda_bench][ceilings]") {
  if (std::getenv("SEQTRANS_CUDA_BENCH") == nullptr || !testing::gpu_available()) return;
  const int64_t size = 8192;
  const Tensor a = device_floats({size, size}, DataType::F16), b = device_floats({size, size}, DataType::F16);
  const double gemm = median_microseconds([&] { ops::matmul(a, b); });
  const double tflops = 2.0 * size * size * size / (gemm * 1e6);
  const int64_t copy_elements = int64_t{1} << 28;  // 1 GiB of fp32
  const Tensor source = device_floats({copy_elements}, DataType::F32);
  Tensor target({copy_elements}, DataType::F32, Device::CUDA);
  const double copy = median_microseconds([&] { ops::copy(source, target); });
  const double gbs = 2.0 * static_cast<double>(copy_elements) * sizeof(float) / (copy * 1e3);
  std::printf("ceilings on %s: fp16 GEMM %dx%dx%d %.0f TFLOP/s, device copy of 1 GiB %.0f GB/s\n",
              cuda::context().properties.name, static_cast<int>(size), static_cast<int>(size), static_cast<int>(size),
              tflops, gbs);
  std::printf("seqtrans bench --peak-tflops %.0f --peak-bandwidth-gbs %.0f\n", tflops, gbs);
}

#endif
