// The translator settings a person writes as text (the CLI's flags, the Python package's keyword
// arguments) and their resolution into TranslatorOptions: both front ends accept the same values and
// refuse bad ones with the same one-line errors.
#pragma once

#include <string>
#include <vector>

#include "translator.h"

namespace seqtrans {

struct TextSettings {
  std::string device = "auto";         // auto | cpu | cuda | cuda:N | cuda:all | cuda:N,M,...
  std::string precision = "auto";      // auto (fp16 on a GPU, fp32 on the CPU) | fp16 | fp32 | int8 (CPU)
  std::string batching = "iteration";  // iteration | shrinking
  std::vector<float> max_length = {256.0f, 0.0f};  // A [B]: at most A + B x source length tokens
  std::string force_eos = "auto";      // auto (as the model file says) | on | off
  // Settings the caller gave; those not given are left to the model file's generation defaults.
  bool beam_size_given = false;
  bool max_length_given = false;
  // Sampling settings given: top-p or min-p alone sample the whole vocabulary (top-k 0 unless given), and
  // any of them means beam size 1 unless the beam size was given.
  bool sampling_topk_given = false;
  bool sampling_topp_given = false;
  bool sampling_minp_given = false;
  // Budgets not given take the device's defaults (kGpuMaxBatchSize, kGpuMaxBatchTokens on a GPU).
  bool max_batch_size_given = false;
  bool max_batch_tokens_given = false;
};

// The devices a run computes on: one engine per entry of `indices`.
struct DevicePlan {
  Device device = Device::CPU;
  std::vector<int> indices = {0};  // CUDA device indices, distinct, in the order given; {0} for the CPU
  bool cpu_fallback = false;       // `auto` found no GPU
};

// "cpu", "cuda:0" or "cuda:0,1": the devices as --device names them.
std::string describe(const DevicePlan& plan);

// Reads a --device value; throws seqtrans::Error (one line naming the value) for a malformed one, a
// build without CUDA, or a device index this machine does not have.
DevicePlan parse_device(const std::string& text);

// Fills `options` (device, dtype, batching mode, the budgets not given, length limit, forced EOS, open
// settings) from `text`
// and returns the devices; options.device_index is the plan's first device.
DevicePlan resolve_settings(const TextSettings& text, TranslatorOptions& options);

// The budgets part of resolve_settings: on a GPU, the budgets not given become the GPU's defaults.
void apply_device_budgets(Device device, const TextSettings& text, BatchingOptions& batching);

// The search part of resolve_settings: the length limit, forced EOS, the sampling settings' implications
// (see TextSettings) and which settings stay open.
void resolve_search_settings(const TextSettings& text, SearchOptions& search, OpenSettings& open);

}  // namespace seqtrans
