#include "translator_settings.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/prepared_weight.h"

namespace seqtrans {
namespace {

constexpr const char* kDeviceForms = "auto, cpu, cuda, cuda:N, cuda:all or cuda:N,M,...";

bool is_index(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
}

// The indices of "cuda:N,M,..." as written (empty for "cuda:all"); only the form is checked here.
std::vector<int> listed_indices(const std::string& text) {
  std::vector<int> indices;
  if (text == "cuda") return {0};
  SEQTRANS_CHECK(text.rfind("cuda:", 0) == 0, "--device: '{}' is not {}", text, kDeviceForms);
  const std::string list = text.substr(5);
  if (list == "all") return indices;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    SEQTRANS_CHECK(is_index(item), "--device: '{}' is not {}", text, kDeviceForms);
    const int index = std::stoi(item);
    SEQTRANS_CHECK(std::find(indices.begin(), indices.end(), index) == indices.end(),
                   "--device {}: device {} is listed twice", text, index);
    indices.push_back(index);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return indices;
}

}  // namespace

std::string describe(const DevicePlan& plan) {
  if (plan.device == Device::CPU) return "cpu";
  std::string text = "cuda:";
  for (size_t i = 0; i < plan.indices.size(); ++i) text += (i > 0 ? "," : "") + std::to_string(plan.indices[i]);
  return text;
}

DevicePlan parse_device(const std::string& text) {
  DevicePlan plan;
  if (text == "auto") {
    plan.device = cuda_device_count() > 0 ? Device::CUDA : Device::CPU;
    plan.cpu_fallback = plan.device == Device::CPU;
    return plan;
  }
  if (text == "cpu") return plan;
  // The form first, so that a typo gets the same answer from every build.
  std::vector<int> indices = listed_indices(text);
  SEQTRANS_CHECK(cuda_compiled(), "--device {}: this build of seqtrans has no CUDA support", text);
  const int count = cuda_device_count();
  if (indices.empty()) {  // cuda:all
    SEQTRANS_CHECK(count > 0, "--device {}: no CUDA device found", text);
    for (int index = 0; index < count; ++index) indices.push_back(index);
  }
  for (int index : indices) SEQTRANS_CHECK(index < count, "--device {}: {} CUDA device(s) found", text, count);
  plan.device = Device::CUDA;
  plan.indices = std::move(indices);
  return plan;
}

DevicePlan resolve_settings(const TextSettings& text, TranslatorOptions& options) {
  const DevicePlan plan = parse_device(text.device);
  options.device = plan.device;
  options.device_index = plan.indices.front();

  SEQTRANS_CHECK(text.precision == "auto" || text.precision == "fp16" || text.precision == "fp32" ||
                     text.precision == "int8",
                 "--precision: '{}' is not auto, fp16, fp32 or int8", text.precision);
  if (text.precision == "auto")
    options.dtype = options.device == Device::CUDA ? DataType::F16 : DataType::F32;
  else
    options.dtype = text.precision == "fp16" ? DataType::F16 : DataType::F32;
  SEQTRANS_CHECK(options.device == Device::CUDA || options.dtype == DataType::F32,
                 "--precision fp16 needs a GPU; the CPU backend computes in fp32");
  options.model.int8_weights = text.precision == "int8";
  SEQTRANS_CHECK(!options.model.int8_weights || options.device == Device::CPU,
                 "--precision int8 runs on the CPU (--device cpu); a GPU computes in fp16 or fp32");
  // Without int8 kernels the products would read the fp32 weights: a user asking for int8 would get fp32's
  // speed and results without a word.
  SEQTRANS_CHECK(!options.model.int8_weights || ops::weight_format_available(ops::WeightFormat::Int8, Device::CPU),
                 "--precision int8 needs a CPU with AVX2 (this one runs the portable kernels only); use --precision "
                 "fp32");

  SEQTRANS_CHECK(text.batching == "iteration" || text.batching == "shrinking",
                 "--batching: '{}' is not iteration or shrinking", text.batching);
  options.batching_mode = text.batching == "shrinking" ? Batching::Shrinking : Batching::Iteration;
  apply_device_budgets(options.device, text, options.batching);

  resolve_search_settings(text, options.search, options.open_settings);
  return plan;
}

void apply_device_budgets(Device device, const TextSettings& text, BatchingOptions& batching) {
  if (device != Device::CUDA) return;
  if (!text.max_batch_size_given) batching.max_batch_size = kGpuMaxBatchSize;
  if (!text.max_batch_tokens_given) batching.max_batch_tokens = kGpuMaxBatchTokens;
}

void resolve_search_settings(const TextSettings& text, SearchOptions& search, OpenSettings& open) {
  SEQTRANS_CHECK(!text.max_length.empty() && text.max_length.size() <= 2, "--max-length takes A or A B");
  const float a = text.max_length[0];
  SEQTRANS_CHECK(a >= 1 && a == std::floor(a) && a < 1e9f, "--max-length: A must be a whole number >= 1, got {}", a);
  search.max_length_a = static_cast<int>(a);
  search.max_length_b = text.max_length.size() > 1 ? text.max_length[1] : 0.0f;
  SEQTRANS_CHECK(search.max_length_b >= 0, "--max-length: B must be >= 0");

  SEQTRANS_CHECK(text.force_eos == "auto" || text.force_eos == "on" || text.force_eos == "off",
                 "--force-eos: '{}' is not auto, on or off", text.force_eos);
  search.force_eos_at_max_length = text.force_eos == "on";

  // What the caller left open, the model file's generation defaults fill (see generation_defaults.h).
  open.beam_size = !text.beam_size_given;
  open.max_length = !text.max_length_given;
  open.forced_eos = text.force_eos == "auto";

  // A sampling setting means one sample per beam slot: beam size 1 unless the caller chose one (a beam size
  // above 1 is then refused by name).
  const bool nucleus = text.sampling_topp_given || text.sampling_minp_given;
  if (nucleus && !text.sampling_topk_given) search.sampling_topk = 0;
  if ((nucleus || text.sampling_topk_given) && !text.beam_size_given) {
    search.beam_size = 1;
    open.beam_size = false;
  }
}

}  // namespace seqtrans
