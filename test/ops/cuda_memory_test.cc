// The caching device allocator: size classes, zero cudaMalloc calls in steady state, clear out-of-memory
// errors.
#include "catch.h"

#ifdef SEQTRANS_WITH_CUDA

#include <cmath>
#include <string>
#include <thread>

#include "core/device.h"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/arena.h"
#include "cuda/runtime/context.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;


TEST_CASE("arena size classes are aligned, monotonic and waste at most a quarter", "[cuda]") {
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 36); bytes = bytes * 5 / 4 + 1) {
    const size_t block = cuda::CachingArena::size_class(bytes);
    CAPTURE(bytes, block);
    CHECK(block >= bytes);
    CHECK(block % 256 == 0);
    CHECK(block >= previous);
    if (bytes > 1024) CHECK(static_cast<double>(block - bytes) <= 0.25 * static_cast<double>(bytes));
    CHECK(cuda::CachingArena::size_class(block) == block);  // a class is its own class
    previous = block;
  }
}

namespace {

// One encoder layer and one decoder step of a small fp16 model, plus the output layer: the tensors a
// translation step allocates and frees.
void run_representative_step(const std::vector<Tensor>& weights) {
  const int64_t batch = 8, time = 23, d = 256, heads = 4, vocab = 3000, slots = 40, capacity = 64;
  const Tensor& qkv = weights[0];
  const Tensor& qkv_bias = weights[1];
  const Tensor& gamma = weights[2];
  const Tensor& beta = weights[3];
  const Tensor& output = weights[4];
  const Tensor& table = weights[5];
  const Tensor ids = random_ints({batch * time}, 0, vocab - 1).to(Device::CUDA);
  const Tensor positions = random_ints({batch * time}, 0, time - 1).to(Device::CUDA);
  const Tensor lengths = random_ints({batch}, 1, time).to(Device::CUDA);
  ops::EmbeddingOptions embedding;
  embedding.scale = 16.0f;
  const Tensor x = ops::embed(ids, positions, table, embedding);
  const std::vector<Tensor> parts = ops::add_bias_split(ops::matmul(x, qkv), qkv_bias, 3);
  const Tensor context = ops::attention(parts[0].reshape({batch, time, d}), parts[1].reshape({batch, time, d}),
                                        parts[2].reshape({batch, time, d}), lengths, {static_cast<int>(heads), 0.125f});
  const Tensor encoded = ops::layer_norm(context.reshape({batch * time, d}), {gamma, beta, 1e-5f});

  Tensor key_cache({slots, capacity, d}, DataType::F16, Device::CUDA);
  Tensor value_cache({slots, capacity, d}, DataType::F16, Device::CUDA);
  Tensor history({slots, capacity}, DataType::I32, Device::CUDA);
  const Tensor step = ops::gather_rows(encoded, random_ints({slots}, 0, batch * time - 1).to(Device::CUDA));
  const Tensor slot_positions = random_ints({slots}, 0, capacity - 1).to(Device::CUDA);
  Tensor hidden = ops::matmul(step, qkv);
  ops::append_self_attention_step(hidden, qkv_bias, slot_positions, key_cache, value_cache, history);
  ops::bias_activation(hidden, qkv_bias, Activation::Relu);
  const Tensor logits = ops::matmul(step, output);
  Tensor values({slots, 10}, DataType::F32, Device::CUDA), indices({slots, 10}, DataType::I32, Device::CUDA);
  ops::TopkOptions topk;
  topk.k = 10;
  cuda::log_softmax_topk(logits, topk, values, indices, cuda::current_stream());
  cuda::synchronize();
}

}  // namespace

TEST_CASE("cuda arena: steady-state steps make no cudaMalloc calls", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t d = 256, vocab = 3000;
  const std::vector<Tensor> weights = {
      ops::convert(random_floats({3 * d, d}, -0.1f, 0.1f).to(Device::CUDA), DataType::F16),
      ops::convert(random_floats({3 * d}).to(Device::CUDA), DataType::F16),
      ops::convert(random_floats({d}).to(Device::CUDA), DataType::F16),
      ops::convert(random_floats({d}).to(Device::CUDA), DataType::F16),
      ops::convert(random_floats({vocab, d}, -0.1f, 0.1f).to(Device::CUDA), DataType::F16),
      ops::convert(random_floats({vocab, d}).to(Device::CUDA), DataType::F16),
  };
  run_representative_step(weights);  // warm-up: the blocks of every size class get carved out
  const cuda::MemoryStats warm = cuda::memory_stats();
  for (int i = 0; i < 5; ++i) run_representative_step(weights);
  const cuda::MemoryStats after = cuda::memory_stats();
  CHECK(after.cuda_malloc_calls == warm.cuda_malloc_calls);
  CHECK(after.bytes_reserved == warm.bytes_reserved);
  CHECK(after.bytes_in_use == warm.bytes_in_use);  // every step's tensors went back to the free lists
  CHECK(after.allocations > warm.allocations);
  CHECK(after.peak_bytes_in_use >= after.bytes_in_use);
  CHECK(after.peak_bytes_in_use <= after.bytes_reserved);
}

TEST_CASE("cuda arena: an impossible reservation fails with one clear line", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const cuda::MemoryStats before = cuda::memory_stats();
  try {
    Tensor huge({int64_t{1} << 40}, DataType::F32, Device::CUDA);  // 4 TiB
    FAIL("a 4 TiB tensor was allocated");
  } catch (const Error& error) {
    const std::string message = error.what();
    CAPTURE(message);
    CHECK(message.find("out of GPU memory") != std::string::npos);
    CHECK(message.find("MiB free of") != std::string::npos);
    CHECK(message.find("--max-batch-tokens") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
  CHECK(cuda::memory_stats().bytes_in_use == before.bytes_in_use);
  // The device is still usable afterwards.
  const Tensor small = random_floats({4, 4}).to(Device::CUDA);
  CHECK(small.to_float_vector().size() == 16);
}

TEST_CASE("cuda arena: at its cap, a small request splits a large free block", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  cuda::ArenaOptions options;
  options.initial_bytes = options.limit_bytes = 8u << 20;
  cuda::CachingArena arena(0, options);
  void* large = arena.allocate(6u << 20);
  void* rest = arena.allocate(2u << 20);  // the cap is carved out to its end
  CHECK_THROWS_AS(arena.allocate(1u << 20), OutOfMemoryError);
  arena.deallocate(large, 6u << 20);
  // 64 KiB is far below the 6 MiB block's class: only a split serves it, and its rest serves more.
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(arena.allocate(64u << 10));
  for (size_t i = 1; i < small.size(); ++i) CHECK(small[i] != small[i - 1]);
  void* medium = arena.allocate(5u << 20);
  CHECK(arena.stats().bytes_reserved == (8u << 20));
  CHECK_THROWS_AS(arena.allocate(2u << 20), OutOfMemoryError);
  for (void* block : small) arena.deallocate(block, 64u << 10);
  arena.deallocate(medium, 5u << 20);
  arena.deallocate(rest, 2u << 20);
  CHECK(arena.stats().bytes_in_use == 0);
}

TEST_CASE("cuda arena: a pointer it did not hand out, or a second free, is an error", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  cuda::CachingArena arena(0, {});
  int foreign = 0;
  CHECK_THROWS_AS(arena.deallocate(&foreign, sizeof(foreign)), Error);
  void* block = arena.allocate(1000);
  arena.deallocate(block, 1000);
  CHECK_THROWS_AS(arena.deallocate(block, 1000), Error);
  CHECK(arena.stats().bytes_in_use == 0);
}

TEST_CASE("cuda runtime: a second initialize on the same device is a no-op", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const cudaStream_t stream = cuda::current_stream();
  cuda::initialize();
  CHECK(cuda::current_stream() == stream);
  CHECK(cuda::context().properties.multiProcessorCount > 0);
  cuda::RuntimeOptions missing;
  missing.device_index = cuda_device_count();  // one past the last device
  CHECK_THROWS_AS(cuda::initialize(missing), Error);
  CHECK(cuda::current_stream() == stream);
}

// The device a pointer lives on, as the driver sees it.
int pointer_device(const void* pointer) {
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, pointer) == cudaSuccess);
  return attributes.device;
}

TEST_CASE("cuda runtime: each thread computes on the device it selected", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  if (cuda_device_count() < 2) {
    WARN("one GPU: the two-device case is skipped");
    return;
  }
  const cudaStream_t first_stream = cuda::current_stream();
  Tensor made_on_second;
  int64_t second_in_use = 0;
  std::thread second([&] {
    cuda::RuntimeOptions options;
    options.device_index = 1;
    cuda::initialize(options);
    CHECK(cuda::context().device_index == 1);
    CHECK(cuda::current_stream() != first_stream);
    made_on_second = random_floats({64, 64}).to(Device::CUDA);
    CHECK(pointer_device(made_on_second.raw()) == 1);
    second_in_use = static_cast<int64_t>(cuda::memory_stats().bytes_in_use);
    // An op on this thread runs on device 1 with device 1's stream.
    Tensor copy({64, 64}, DataType::F32, Device::CUDA);
    ops::copy(made_on_second, copy);
    CHECK(copy.to_float_vector() == made_on_second.to_float_vector());
  });
  second.join();
  // This thread still computes on device 0.
  CHECK(cuda::context().device_index == 0);
  CHECK(cuda::current_stream() == first_stream);
  const Tensor here = random_floats({8, 8}).to(Device::CUDA);
  CHECK(pointer_device(here.raw()) == 0);
  // A tensor freed on another thread goes back to the arena it came from.
  made_on_second = Tensor();
  cuda::use_device(1);
  CHECK(static_cast<int64_t>(cuda::memory_stats().bytes_in_use) < second_in_use);
  cuda::use_device(0);
}

#endif
