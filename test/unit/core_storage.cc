// Tests for Storage: memory goes back to the allocator it came from, whatever is current by then.
#include <cstdlib>
#include <memory>
#include <vector>

#include "catch.h"
#include "core/allocator.h"
#include "core/tensor.h"

namespace seqtrans {
namespace {

// Host memory posing as a device allocator; records what it hands out and takes back.
class RecordingAllocator : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* pointer = std::malloc(bytes == 0 ? 1 : bytes);
    handed_out.push_back(pointer);
    return pointer;
  }
  void deallocate(void* pointer, size_t) override {
    taken_back.push_back(pointer);
    std::free(pointer);
  }
  std::vector<void*> handed_out;
  std::vector<void*> taken_back;
};

// Installs `allocator` for Device::CUDA for the scope, then puts the previous one back.
class InstalledAllocator {
 public:
  explicit InstalledAllocator(Allocator* allocator) : previous_(set_allocator(Device::CUDA, allocator)) {}
  ~InstalledAllocator() { set_allocator(Device::CUDA, previous_); }
  InstalledAllocator(const InstalledAllocator&) = delete;
  InstalledAllocator& operator=(const InstalledAllocator&) = delete;

 private:
  Allocator* previous_;
};

}  // namespace

TEST_CASE("a tensor's memory goes back to the allocator it came from, not the current one", "[core]") {
  RecordingAllocator first, second;
  const InstalledAllocator restore(&first);
  auto tensor = std::make_unique<Tensor>(Shape{4, 8}, DataType::F32, Device::CUDA);
  REQUIRE(first.handed_out.size() == 1);
  set_allocator(Device::CUDA, &second);
  tensor.reset();
  CHECK(first.taken_back == first.handed_out);
  CHECK(second.taken_back.empty());
}

TEST_CASE("borrowed memory is never freed", "[core]") {
  RecordingAllocator allocator;
  const InstalledAllocator restore(&allocator);
  std::vector<float> values(6, 1.0f);
  { const Tensor view = Tensor::borrow(values.data(), {2, 3}, DataType::F32, Device::CUDA); }
  CHECK(allocator.handed_out.empty());
  CHECK(allocator.taken_back.empty());
}

}  // namespace seqtrans
