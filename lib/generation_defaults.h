// How a model file's generation defaults (the checkpoint's num_beams, max_length, forced_eos_token_id)
// fill the search settings that the caller left open, as HF generate() reads them from the checkpoint.
#pragma once

#include <string>

#include "format/model_config.h"
#include "search/options.h"

namespace seqtrans {

// Where a search setting's value comes from.
enum class SettingSource {
  Caller,      // set explicitly (a command-line option)
  ModelFile,   // the model file's default replaced the built-in value
  BuiltIn,     // left open, and the model file has no default for it
};

// Which settings the caller left open to the model file's defaults.
struct OpenSettings {
  bool beam_size = false;
  bool max_length = false;
  bool forced_eos = false;
};

// What apply_generation_defaults decided, per setting.
struct SettingSources {
  SettingSource beam_size = SettingSource::Caller;
  SettingSource max_length = SettingSource::Caller;
  SettingSource forced_eos = SettingSource::Caller;
};

// Replaces each open setting of `search` by the model's default when the model has one:
//   num_beams -> beam_size; max_length -> max_length_a = max_length - 1 (HF counts the decoder start
//   token), max_length_b = 0; forced_eos_token_id -> force_eos_at_max_length (absent: off).
SettingSources apply_generation_defaults(const GenerationDefaults& defaults, const OpenSettings& open,
                                         SearchOptions& search);

// One line naming each setting's value and its origin, e.g. "beam size 4 (model file: num_beams 4),
// max length 511 + 0 x source (model file: max_length 512), forced EOS off (built-in)".
std::string describe_search_settings(const SearchOptions& search, const SettingSources& sources,
                                     const GenerationDefaults& defaults);

}  // namespace seqtrans
