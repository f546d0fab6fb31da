// Flags shared by `translate` and `bench` (model, device, decoding, batching) and their resolution
// into the library's typed options. Only app/ knows flag names.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "translator.h"

namespace seqtrans::app {

enum class LogLevel { Error, Warning, Info };

struct CommonOptions {
  TranslatorOptions translator;
  std::string device = "auto";     // auto | cpu | cuda | cuda:N
  std::string precision = "auto";  // auto | fp32 | fp16
  std::string batching = "iteration";  // iteration | shrinking
  std::vector<float> max_length = {256.0f, 0.0f};
  std::string force_eos = "auto";  // auto (as the model file says) | on | off
  // Options whose default may come from the model file: set when the user gave them.
  CLI::Option* beam_size_option = nullptr;
  CLI::Option* max_length_option = nullptr;
  // Sampling flags: which the user gave decides the defaults of the others (resolve_common_options).
  CLI::Option* sampling_topk_option = nullptr;
  CLI::Option* sampling_topp_option = nullptr;
  CLI::Option* sampling_minp_option = nullptr;
  bool quiet = false;
  LogLevel log_level = LogLevel::Warning;
  // Set when --device auto found no GPU; noted once the model has loaded (an error comes alone).
  bool cpu_fallback = false;
};

// Registers the shared flags on `command`, writing into `options`.
void add_common_options(CLI::App& command, CommonOptions& options);

// Fills translator.device/dtype/search.max_length_*/force_eos and open_settings from the strings and
// from which options the user gave.
void resolve_common_options(CommonOptions& options);

// The model used when -m is not given: $SEQTRANS_MODEL, else the bundled demo model.
std::string default_model_path();

// Prints the note that --device auto fell back to the CPU, if it did.
void note_device_choice(const CommonOptions& options);

// Prints "seqtrans: <message>" on stderr when `level` is enabled.
void log(const CommonOptions& options, LogLevel level, const std::string& message);

}  // namespace seqtrans::app
