// WeightLoader::get_dense: a Dense weight in the CPU's forms. Int8 keeps only the quantized panels, and the
// products read nothing else; a large fp32 weight (a layer's, or an untied output layer's) keeps only its panels
// once they are written.
#include <string>

#include "catch.h"
#include "core/error.h"
#include "cpu/packed_matrix.h"
#include "format/model_file.h"
#include "layers/weights.h"
#include "models/engine_model.h"
#include "models/output_head.h"
#include "ops/ops.h"
#include "support/model_builder.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

// The name of the first tensor of the model whose name ends with `suffix`.
std::string tensor_named(const ModelImage& image, const std::string& suffix) {
  for (const auto& entry : image.header.tensors()) {
    const std::string& name = entry.name();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return name;
  }
  FAIL("no tensor named *" << suffix);
  return "";
}

// A tiny model written to a file of its own and opened, with the name and shape of one of its weights.
struct OpenedModel {
  ModelImage image;
  ModelFile file;
  std::string name;
  Shape shape;
};

OpenedModel open_tiny_model(const TinyModelShape& shape, const std::string& stem, const std::string& weight_suffix) {
  ModelImage image = make_tiny_model(shape);
  const std::string path = temp_path(stem);
  write_model_file(path, image);
  ModelFile file = ModelFile::open(path);
  std::string name = tensor_named(image, weight_suffix);
  Shape weight_shape = file.tensors().at(name).shape();
  return OpenedModel{std::move(image), std::move(file), std::move(name), std::move(weight_shape)};
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
  const OpenedModel model = open_tiny_model({}, "weights_int8.seqtrans", "/qkv/weight");
  const ModelFile& file = model.file;
  const std::string& name = model.name;
  const Shape& shape = model.shape;
  if (!ops::weight_format_available(ops::WeightFormat::Int8, Device::CPU)) {
    // No int8 kernels (no AVX2): the loader falls back to the plain weight, which it keeps.
    const DenseWeight weight =
        WeightLoader(file, Device::CPU, DataType::F32, ops::WeightFormat::Int8).get_dense(name, shape);
    CHECK(weight.prepared == nullptr);
    CHECK_NOTHROW(weight.weight.raw());
    return;
  }
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

TEST_CASE("a large fp32 Dense weight packed on use keeps its plain values only until its panels are written",
          "[weights]") {
  if (!ops::weight_format_available(ops::WeightFormat::Packed, Device::CPU)) return;  // no packed kernels: plain
  TinyModelShape shape_of_model;
  shape_of_model.d_model = 512;
  shape_of_model.ffn = 4096;  // the feed-forward weights: 8 MiB of fp32 each, past the loader's threshold
  shape_of_model.encoder_layers = shape_of_model.decoder_layers = 1;
  const OpenedModel model = open_tiny_model(shape_of_model, "weights_packed.seqtrans", "/ffn/inner/weight");
  const ModelFile& file = model.file;
  const std::string& name = model.name;
  const Shape& shape = model.shape;

  const WeightLoader loader(file, Device::CPU, DataType::F32, ops::WeightFormat::Packed);
  const DenseWeight packed = loader.get_dense(name, shape);
  REQUIRE(packed.prepared != nullptr);
  CHECK(packed.weight.shape() == shape);
  CHECK_FALSE(packed.weight.has_data());
  const auto* matrix = static_cast<const cpu::PackedMatrix*>(packed.prepared.get());
  CHECK(matrix->source().has_data());

  // Before the panels (packed on the fly from the matrix's copy) and after (the copy dropped): the products
  // of the weight loaded in full, bit for bit.
  const Tensor full = WeightLoader(file, Device::CPU, DataType::F32).get(name, shape);
  const Tensor x = random_floats({3, shape[1]}, -1.0f, 1.0f);
  const std::vector<float> expected = ops::matmul(x, full, ops::MatmulOptions{}).to_float_vector();
  ops::MatmulOptions options;
  options.prepared_b = packed.prepared.get();
  for (int product = 0; product < cpu::PackedMatrix::kPackOnUse + 1; ++product) {
    CAPTURE(product);
    CHECK(ops::matmul(x, packed.weight, options).to_float_vector() == expected);
  }
  CHECK(matrix->packed());
  CHECK_FALSE(matrix->source().has_data());
}

TEST_CASE(
    "an untied output layer over a large weight keeps only its panels, written at load, and selects as the full weight",
    "[weights]") {
  if (!ops::weight_format_available(ops::WeightFormat::Packed, Device::CPU)) return;  // no packed kernels: plain
  TinyLlamaShape shape_of_model;
  shape_of_model.d_model = 512;
  shape_of_model.heads = 8;
  shape_of_model.kv_heads = 8;
  shape_of_model.layers = 1;
  shape_of_model.vocab = 4096;  // an output weight of 8 MiB of fp32, past the loader's threshold
  const std::string path = temp_path("untied_head.seqtrans");
  write_model_file(path, make_tiny_llama_model(shape_of_model));
  const ModelFile file = ModelFile::open(path);
  const Shape shape{shape_of_model.vocab, shape_of_model.d_model};

  DenseWeight untied = untied_output_weight(file, ModelOptions{}, shape);
  // Its panels are written at load, and no plain copy is left.
  const auto* matrix = dynamic_cast<const cpu::PackedMatrix*>(untied.prepared.get());
  REQUIRE(matrix != nullptr);
  CHECK(matrix->packed());
  CHECK_FALSE(matrix->source().has_data());
  const OutputHead head(std::move(untied), Tensor(), ops::TopkAlgorithm::Auto);
  CHECK(head.weight().shape() == shape);
  CHECK_FALSE(head.weight().has_data());
  const OutputHead full(WeightLoader(file, Device::CPU, DataType::F32).get("decoder/output/weight", shape), Tensor(),
                        ops::TopkAlgorithm::Auto);
  SuppressedLists suppressed;
  suppressed.select({}, shape_of_model.vocab, Device::CPU);
  const Tensor x = random_floats({3, shape_of_model.d_model}, -1.0f, 1.0f);
  // The same k best as the full weight (whose panels are packed on the fly, then written), bit for bit.
  for (int product = 0; product < cpu::PackedMatrix::kPackOnUse + 1; ++product) {
    CAPTURE(product);
    Tensor values, ids, full_values, full_ids;
    head.select(x, OutputSelection{4, &suppressed}, values, ids);
    full.select(x, OutputSelection{4, &suppressed}, full_values, full_ids);
    CHECK(ids.to_int_vector() == full_ids.to_int_vector());
    CHECK(values.to_float_vector() == full_values.to_float_vector());
  }
}
