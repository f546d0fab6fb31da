// Flags shared by `translate` and `bench` (model, device, decoding, batching) and their resolution
// into the library's typed options. Only app/ knows flag names.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "translator.h"
#include "translator_settings.h"

namespace seqtrans::app {

enum class LogLevel { Error, Warning, Info };

struct CommonOptions {
  TranslatorOptions translator;
  TextSettings text;  // --device, --precision, --batching, --max-length, --force-eos as written
  // Options whose default may come from the model file: set when the user gave them.
  CLI::Option* model_option = nullptr;
  CLI::Option* beam_size_option = nullptr;
  CLI::Option* max_length_option = nullptr;
  CLI::Option* max_batch_size_option = nullptr;
  CLI::Option* max_batch_tokens_option = nullptr;
  // Sampling flags: which the user gave decides the defaults of the others (resolve_common_options).
  CLI::Option* sampling_topk_option = nullptr;
  CLI::Option* sampling_topp_option = nullptr;
  CLI::Option* sampling_minp_option = nullptr;
  size_t max_gpu_memory_mib = 0;  // --max-gpu-memory, into translator.max_gpu_memory (bytes)
  int max_new_tokens = 0;         // generate's --max-new-tokens N: --max-length N 0 (0: not given)
  Languages languages;            // --source-lang, --target-lang (multilingual models)
  bool quiet = false;
  LogLevel log_level = LogLevel::Warning;
  // The devices resolved from --device; a fallback to the CPU is noted once the model has loaded (an
  // error comes alone).
  DevicePlan devices;
};

// Registers the shared flags on `command`, writing into `options`; -m defaults to the bundled model of
// `default_kind` (default_model_path).
void add_common_options(CLI::App& command, CommonOptions& options, ModelKind default_kind = ModelKind::EncoderDecoder);

// Fills translator.device/dtype/search.max_length_*/force_eos and open_settings from the strings and
// from which options the user gave (translator_settings.h), and sets `devices`.
void resolve_common_options(CommonOptions& options);

// The model used when -m is not given: $SEQTRANS_MODEL, else the bundled demo model of that kind
// (models/opus-demo-en-de.seqtrans, or the decoder-only models/llama-demo-en-de.seqtrans).
std::string default_model_path(ModelKind kind = ModelKind::EncoderDecoder);

// Prints the notes on what the run will not do as asked: --device auto fell back to the CPU, or
// --threads is ignored by this build's BLAS.
void note_setup_choices(const CommonOptions& options);

// Prints "seqtrans: <message>" on stderr when `level` is enabled.
void log(const CommonOptions& options, LogLevel level, const std::string& message);

}  // namespace seqtrans::app
