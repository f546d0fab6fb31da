// The model file's generation defaults fill only the search settings the caller left open.
#include "generation_defaults.h"

#include "catch.h"

using namespace seqtrans;

namespace {

GenerationDefaults opus_mt_defaults() {
  GenerationDefaults defaults;
  defaults.max_length = 512;
  defaults.num_beams = 6;
  defaults.forced_eos_token_id = 0;
  return defaults;
}

}  // namespace

TEST_CASE("open settings take the model's defaults; max_length counts the decoder start", "[generation_defaults]") {
  SearchOptions search;
  search.max_length_b = 1.5f;
  const SettingSources sources = apply_generation_defaults(opus_mt_defaults(), {true, true, true}, search);
  CHECK(search.beam_size == 6);
  CHECK(search.max_length_a == 511);
  CHECK(search.max_length_b == 0.0f);
  CHECK(search.force_eos_at_max_length);
  CHECK(sources.beam_size == SettingSource::ModelFile);
  CHECK(sources.max_length == SettingSource::ModelFile);
  CHECK(sources.forced_eos == SettingSource::ModelFile);
  const std::string summary = describe_search_settings(search, sources, opus_mt_defaults());
  CHECK(summary.find("beam size 6 (model file: num_beams 6)") != std::string::npos);
  CHECK(summary.find("max length 511 + 0 x source tokens (model file: max_length 512)") != std::string::npos);
  CHECK(summary.find("forced EOS at the limit on (model file: forced_eos_token_id 0)") != std::string::npos);
}

TEST_CASE("settings the caller gave stay, whatever the model says", "[generation_defaults]") {
  SearchOptions search;
  search.beam_size = 2;
  search.max_length_a = 5;
  search.force_eos_at_max_length = false;
  const SettingSources sources = apply_generation_defaults(opus_mt_defaults(), {false, false, false}, search);
  CHECK(search.beam_size == 2);
  CHECK(search.max_length_a == 5);
  CHECK_FALSE(search.force_eos_at_max_length);
  CHECK(sources.beam_size == SettingSource::Caller);
  CHECK(describe_search_settings(search, sources, opus_mt_defaults()).find("(command line)") != std::string::npos);
}

TEST_CASE("a model without defaults leaves the built-in values and no forced EOS", "[generation_defaults]") {
  SearchOptions search;
  search.force_eos_at_max_length = true;  // only an explicit --force-eos on keeps it
  const SettingSources sources = apply_generation_defaults(GenerationDefaults{}, {true, true, true}, search);
  CHECK(search.beam_size == SearchOptions{}.beam_size);
  CHECK(search.max_length_a == SearchOptions{}.max_length_a);
  CHECK_FALSE(search.force_eos_at_max_length);
  CHECK(sources.beam_size == SettingSource::BuiltIn);
  CHECK(sources.max_length == SettingSource::BuiltIn);
  CHECK(sources.forced_eos == SettingSource::BuiltIn);
}
