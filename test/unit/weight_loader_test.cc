// WeightLoader::get_dense: a Dense weight in the CPU's forms. Int8 keeps only the quantized panels, and the
// products read nothing else.
#include <string>

#include "catch.h"
#include "core/error.h"
#include "format/model_file.h"
#include "layers/weights.h"
#include "ops/ops.h"
#include "support/model_builder.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

// The name and shape of the first fused self-attention projection in the file.
std::string qkv_weight_name(const ModelFile& file, const ModelImage& image) {
  for (const auto& entry : image.header.tensors()) {
    const std::string& name = entry.name();
    if (name.size() > 11 && name.compare(name.size() - 11, 11, "/qkv/weight") == 0 && file.has_tensor(name))
      return name;
  }
  FAIL("no qkv weight in the tiny model");
  return "";
}

}  // namespace

TEST_CASE("Tensor::shape_only has a shape and no memory", "[tensor]") {
  const Tensor tensor = Tensor::shape_only({6, 4}, DataType::F32, Device::CPU);
  CHECK(tensor.defined());
  CHECK(tensor.dim(0) == 6);
  CHECK(tensor.dim(1) == 4);
  CHECK(tensor.reshape({24}).elements() == 24);
  CHECK_THROWS_AS(tensor.raw(), Error);
  CHECK_THROWS_AS(tensor.slice_rows(1, 3).data<float>(), Error);
  CHECK_THROWS_AS(tensor.to(DataType::F16), Error);
}

TEST_CASE("an int8 Dense weight keeps only its panels, and its products are those of the full weight",
          "[weights][int8]") {
  if (!ops::weight_format_available(ops::WeightFormat::Int8, Device::CPU)) {
    // No int8 kernels (no AVX2): the loader falls back to the plain weight, which it keeps.
    const ModelImage image = make_tiny_model({});
    const std::string path = temp_path("weights_plain.seqtrans");
    write_model_file(path, image);
    const ModelFile file = ModelFile::open(path);
    const WeightLoader loader(file, Device::CPU, DataType::F32, ops::WeightFormat::Int8);
    const std::string name = qkv_weight_name(file, image);
    const DenseWeight weight = loader.get_dense(name, file.tensors().at(name).shape());
    CHECK(weight.prepared == nullptr);
    CHECK_NOTHROW(weight.weight.raw());
    return;
  }
  const ModelImage image = make_tiny_model({});
  const std::string path = temp_path("weights_int8.seqtrans");
  write_model_file(path, image);
  const ModelFile file = ModelFile::open(path);
  const std::string name = qkv_weight_name(file, image);
  const Shape shape = file.tensors().at(name).shape();

  const WeightLoader int8_loader(file, Device::CPU, DataType::F32, ops::WeightFormat::Int8);
  const DenseWeight int8 = int8_loader.get_dense(name, shape);
  REQUIRE(int8.prepared != nullptr);
  CHECK(int8.prepared->format() == ops::WeightFormat::Int8);
  CHECK(int8.weight.shape() == shape);
  CHECK_THROWS_AS(int8.weight.raw(), Error);  // the fp32 values were dropped

  // The same quantization of the weight as loaded in full: the products' bits are the same.
  const WeightLoader plain_loader(file, Device::CPU, DataType::F32);
  const Tensor full = plain_loader.get(name, shape);
  const auto reference = ops::prepare_weight(full, ops::WeightFormat::Int8);
  const Tensor x = random_floats({3, shape[1]}, -1.0f, 1.0f);
  ops::MatmulOptions dropped, kept;
  dropped.prepared_b = int8.prepared.get();
  kept.prepared_b = reference.get();
  CHECK(ops::matmul(x, int8.weight, dropped).to_float_vector() == ops::matmul(x, full, kept).to_float_vector());

  // Packed fp32 panels are written on use from the plain weight, which stays.
  const WeightLoader packed_loader(file, Device::CPU, DataType::F32, ops::WeightFormat::Packed);
  CHECK_NOTHROW(packed_loader.get_dense(name, shape).weight.raw());
}
