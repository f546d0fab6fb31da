// The settings both front ends resolve: the batch budgets' defaults per device.
#include "catch.h"
#include "support/errors.h"
#include "translator_settings.h"

using namespace seqtrans;

TEST_CASE("the batch budgets default per device, and a budget given stays as given", "[unit]") {
  TextSettings text;
  BatchingOptions batching;
  apply_device_budgets(Device::CPU, text, batching);
  CHECK(batching.max_batch_size == kCpuMaxBatchSize);
  CHECK(batching.max_batch_tokens == kCpuMaxBatchTokens);

  apply_device_budgets(Device::CUDA, text, batching);
  CHECK(batching.max_batch_size == kGpuMaxBatchSize);
  CHECK(batching.max_batch_tokens == kGpuMaxBatchTokens);

  BatchingOptions given;
  given.max_batch_size = 8;
  given.max_batch_tokens = 100;
  text.max_batch_size_given = true;
  apply_device_budgets(Device::CUDA, text, given);
  CHECK(given.max_batch_size == 8);
  CHECK(given.max_batch_tokens == kGpuMaxBatchTokens);
  text.max_batch_tokens_given = true;
  given.max_batch_tokens = 100;
  apply_device_budgets(Device::CUDA, text, given);
  CHECK(given.max_batch_tokens == 100);
}

TEST_CASE("resolving CPU settings keeps the CPU's budgets", "[unit]") {
  TextSettings text;
  text.device = "cpu";
  TranslatorOptions options;
  resolve_settings(text, options);
  CHECK(options.batching.max_batch_size == kCpuMaxBatchSize);
  CHECK(options.batching.max_batch_tokens == kCpuMaxBatchTokens);
}

TEST_CASE("--precision int8 is the CPU's: fp32 activations with int8 weights; fp32 and auto leave weights fp32",
          "[unit]") {
  TextSettings text;
  text.device = "cpu";
  text.precision = "int8";
  TranslatorOptions options;
  resolve_settings(text, options);
  CHECK(options.dtype == DataType::F32);
  CHECK(options.model.int8_weights);
  for (const char* precision : {"fp32", "auto"}) {
    text.precision = precision;
    TranslatorOptions plain;
    resolve_settings(text, plain);
    CHECK_FALSE(plain.model.int8_weights);
  }
  text.precision = "int4";
  TranslatorOptions refused;
  CHECK(testing::error_of([&] { resolve_settings(text, refused); }).find("is not auto, fp16, fp32 or int8") !=
        std::string::npos);
}
