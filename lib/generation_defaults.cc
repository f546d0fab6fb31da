#include "generation_defaults.h"

#include <fmt/format.h>

namespace seqtrans {
namespace {

std::string origin(SettingSource source, const std::string& model_detail) {
  switch (source) {
    case SettingSource::Caller: return "command line";
    case SettingSource::ModelFile: return "model file: " + model_detail;
    case SettingSource::BuiltIn: return "built-in default";
  }
  return "";
}

}  // namespace

SettingSources apply_generation_defaults(const GenerationDefaults& defaults, const OpenSettings& open,
                                         SearchOptions& search) {
  SettingSources sources;
  if (open.beam_size) {
    sources.beam_size = defaults.num_beams ? SettingSource::ModelFile : SettingSource::BuiltIn;
    if (defaults.num_beams) search.beam_size = *defaults.num_beams;
  }
  if (open.max_length) {
    sources.max_length = defaults.max_length ? SettingSource::ModelFile : SettingSource::BuiltIn;
    if (defaults.max_length) {
      search.max_length_a = *defaults.max_length - 1;
      search.max_length_b = 0.0f;
    }
  }
  if (open.forced_eos) {
    // A checkpoint without forced_eos_token_id asks for no forcing, so the model file decides either way.
    sources.forced_eos = defaults.forced_eos_token_id ? SettingSource::ModelFile : SettingSource::BuiltIn;
    search.force_eos_at_max_length = defaults.forced_eos_token_id.has_value();
  }
  return sources;
}

std::string describe_search_settings(const SearchOptions& search, const SettingSources& sources,
                                     const GenerationDefaults& defaults) {
  const std::string beams = fmt::format("beam size {} ({})", search.beam_size,
                                        origin(sources.beam_size, fmt::format("num_beams {}", defaults.num_beams.value_or(0))));
  const std::string length =
      fmt::format("max length {} + {} x source tokens ({})", search.max_length_a, search.max_length_b,
                  origin(sources.max_length, fmt::format("max_length {}", defaults.max_length.value_or(0))));
  const std::string forced = fmt::format(
      "forced EOS at the limit {} ({})", search.force_eos_at_max_length ? "on" : "off",
      origin(sources.forced_eos, fmt::format("forced_eos_token_id {}", defaults.forced_eos_token_id.value_or(-1))));
  return beams + ", " + length + ", " + forced;
}

}  // namespace seqtrans
