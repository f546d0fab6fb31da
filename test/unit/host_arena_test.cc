// Tests for HostArena: tensors made in a scope take its memory, aligned and distinct, and the arena's
// mappings go once its last holder and its last tensor are gone, in either order.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "catch.h"
#include "core/allocator.h"
#include "core/host_arena.h"
#include "core/tensor.h"

namespace seqtrans {
namespace {

// Whether `pointer` lies in one of the process's mappings (/proc/self/maps).
bool mapped(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    range >> std::hex >> begin >> dash >> end;
    if (address >= begin && address < end) return true;
  }
  return false;
}

bool aligned(const void* pointer, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

}  // namespace

TEST_CASE("host tensors made in an arena scope take the arena's memory", "[core]") {
  const HostArenaRef arena = HostArena::open();
  Tensor first, second, outside;
  {
    const HostArenaScope scope(arena.get());
    CHECK(current_host_arena() == arena.get());
    CHECK(&allocator_for(Device::CPU) == arena.get());
    first = Tensor({3, 5}, DataType::F32);
    second = Tensor({1000}, DataType::F32);
  }
  CHECK(current_host_arena() == nullptr);
  CHECK(&allocator_for(Device::CPU) != arena.get());
  outside = Tensor({4}, DataType::F32);
  // The first allocation opens a mapping at a huge-page boundary; the next follows it, 64-byte aligned.
  CHECK(aligned(first.raw(), uintptr_t{2} << 20));
  CHECK(aligned(second.raw(), 64));
  CHECK(static_cast<char*>(second.raw()) >= static_cast<char*>(first.raw()) + first.bytes());
  first.data<float>()[14] = 1.0f;
  second.data<float>()[999] = 2.0f;
  CHECK(first.data<float>()[14] == 1.0f);
}

TEST_CASE("arena scopes nest", "[core]") {
  const HostArenaRef outer = HostArena::open(), inner = HostArena::open();
  const HostArenaScope outer_scope(outer.get());
  {
    const HostArenaScope inner_scope(inner.get());
    CHECK(current_host_arena() == inner.get());
    {
      const HostArenaScope none(nullptr);  // plain host memory inside
      CHECK(current_host_arena() == nullptr);
      CHECK(&allocator_for(Device::CPU) != inner.get());
    }
    CHECK(&allocator_for(Device::CPU) == inner.get());
  }
  CHECK(current_host_arena() == outer.get());
  CHECK(&allocator_for(Device::CPU) == outer.get());
}

TEST_CASE("an arena is unmapped once its holders and its tensors are all gone", "[core]") {
  SECTION("the tensor outlives the arena's last holder") {
    Tensor tensor;
    {
      const HostArenaRef arena = HostArena::open();
      const HostArenaScope scope(arena.get());
      tensor = Tensor({64}, DataType::F32);
    }
    void* memory = tensor.raw();
    tensor.data<float>()[63] = 3.0f;  // still the tensor's
    CHECK(mapped(memory));
    tensor = Tensor();
    CHECK_FALSE(mapped(memory));
  }
  SECTION("the holder outlives the tensor") {
    auto arena = std::make_unique<HostArenaRef>(HostArena::open());
    void* memory = nullptr;
    {
      const HostArenaScope scope(arena->get());
      const Tensor tensor({64}, DataType::F32);
      memory = tensor.raw();
    }
    CHECK(mapped(memory));
    arena.reset();
    CHECK_FALSE(mapped(memory));
  }
}

TEST_CASE("an arena takes allocations larger than its mappings, then goes on", "[core]") {
  const HostArenaRef arena = HostArena::open();
  const HostArenaScope scope(arena.get());
  const Tensor large({int64_t{48} << 18}, DataType::F32);  // 48 MiB
  const Tensor small({16}, DataType::F32);
  large.data<float>()[large.elements() - 1] = 4.0f;
  small.data<float>()[15] = 5.0f;
  CHECK(aligned(large.raw(), uintptr_t{2} << 20));
  CHECK(large.data<float>()[large.elements() - 1] == 4.0f);
}

}  // namespace seqtrans
