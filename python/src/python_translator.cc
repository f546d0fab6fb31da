#include "python_translator.h"

#include <tuple>

#include "core/error.h"
#include "format/model_file.h"
#include "translate_command.h"

namespace seqtrans::python {
namespace {

// A call's settings as the CLI would hold them: the text settings and the search options.
void resolve_call(const CallArgs& call, SearchOptions& search, OpenSettings& open) {
  TextSettings text;
  text.beam_size_given = call.beam_size.has_value();
  text.max_length_given = call.max_length.has_value();
  if (call.max_length) text.max_length = *call.max_length;
  if (call.force_eos) text.force_eos = *call.force_eos ? "on" : "off";
  text.sampling_topk_given = call.sampling_topk.has_value();
  text.sampling_topp_given = call.sampling_topp.has_value();
  text.sampling_minp_given = call.sampling_minp.has_value();
  search = SearchOptions();
  if (call.beam_size) search.beam_size = *call.beam_size;
  search.num_hypotheses = call.n_best;
  search.length_penalty = call.length_penalty;
  if (call.sampling_topk) search.sampling_topk = *call.sampling_topk;
  if (call.sampling_topp) search.sampling_topp = *call.sampling_topp;
  if (call.sampling_minp) search.sampling_minp = *call.sampling_minp;
  search.temperature = call.temperature;
  search.seed = call.seed;
  search.repetition_penalty = call.repetition_penalty;
  search.no_repeat_ngram_size = call.no_repeat_ngram_size;
  search.beam_groups = call.beam_groups;
  search.diversity_penalty = call.diversity_penalty;
  resolve_search_settings(text, search, open);
}

WarningSink collect_into(std::vector<std::string>& warnings) {
  return [&warnings](const std::string& message) { warnings.push_back(message); };
}

}  // namespace

bool CallArgs::operator==(const CallArgs& other) const {
  const auto fields = [](const CallArgs& c) {
    return std::tie(c.beam_size, c.n_best, c.length_penalty, c.max_length, c.force_eos, c.sampling_topk,
                    c.sampling_topp, c.sampling_minp, c.temperature, c.seed, c.repetition_penalty,
                    c.no_repeat_ngram_size, c.beam_groups, c.diversity_penalty);
  };
  return fields(*this) == fields(other);
}

PythonTranslator::PythonTranslator(const EngineArgs& args) {
  TranslatorOptions options;
  options.model_path = args.model_path;
  options.cpu_threads = args.threads;
  if (args.max_batch_size) options.batching.max_batch_size = *args.max_batch_size;
  if (args.max_batch_tokens) options.batching.max_batch_tokens = *args.max_batch_tokens;
  options.batching.read_ahead = args.read_ahead;
  options.min_join = args.min_join;
  options.max_input_length = args.max_input_length;
  options.max_gpu_memory = args.max_gpu_memory_mib << 20;
  options.model.tuning.batch_invariant = args.batch_invariant;
  TextSettings text;
  text.device = args.device;
  text.precision = args.precision;
  text.batching = args.batching;
  text.max_batch_size_given = args.max_batch_size.has_value();
  text.max_batch_tokens_given = args.max_batch_tokens.has_value();
  const DevicePlan devices = resolve_settings(text, options);
  resolve_call(current_, options.search, options.open_settings);
  device_ = describe(devices);
  group_ = std::make_unique<TranslatorGroup>(options, devices.indices);
}

void PythonTranslator::use(const CallArgs& call, const LineSettings& line_settings) {
  if (line_settings.languages != current_lines_.languages) {
    group_->set_languages(line_settings.languages);
    current_lines_.languages = line_settings.languages;
  }
  if (line_settings.target_prefixes != current_lines_.target_prefixes) {
    group_->set_target_prefixes(line_settings.target_prefixes);
    current_lines_.target_prefixes = line_settings.target_prefixes;
  }
  if (call == current_) return;
  SearchOptions search;
  OpenSettings open;
  resolve_call(call, search, open);
  group_->set_search(search, open);
  current_ = call;
}

std::vector<Result> PythonTranslator::translate_batch(const std::vector<std::string>& lines, const CallArgs& call,
                                                      bool with_scores, const LineSettings& line_settings,
                                                      std::vector<std::string>& warnings) {
  const size_t prefixes = line_settings.target_prefixes.size(), languages = line_settings.languages.size();
  SEQTRANS_CHECK(prefixes == 0 || prefixes == lines.size(),
                 "target_prefix: {} prefixes for {} lines (give one per line, \"\" for none)", prefixes, lines.size());
  SEQTRANS_CHECK(languages <= 1 || languages == lines.size(),
                 "source_lang/target_lang: {} languages for {} lines (give one code, or one per line)", languages,
                 lines.size());
  std::vector<Line> input;
  input.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) input.push_back(Line{i, lines[i]});
  std::lock_guard<std::mutex> lock(mutex_);
  use(call, line_settings);
  const std::vector<Translation> translations = group_->translate(input, collect_into(warnings));
  std::vector<Result> results(translations.size());
  for (size_t i = 0; i < translations.size(); ++i) {
    const Translation& translation = translations[i];
    for (size_t k = 0; k < translation.texts.size(); ++k) {
      Hypothesis hypothesis{translation.texts[k], std::nullopt, translation.tokens[k]};
      if (with_scores) hypothesis.score = translation.scores[k];
      results[i].hypotheses.push_back(std::move(hypothesis));
    }
  }
  return results;
}

size_t PythonTranslator::translate_file(const std::string& input, const std::string& output, const CallArgs& call,
                                        bool with_scores, const std::vector<Languages>& languages,
                                        std::vector<std::string>& warnings) {
  SEQTRANS_CHECK(languages.size() <= 1, "translate_file: one source_lang and target_lang for the whole file");
  std::lock_guard<std::mutex> lock(mutex_);
  use(call, LineSettings{{}, languages});
  const size_t before = group_->stats().sentences;
  app::translate_file(*group_, input, output, with_scores, collect_into(warnings));
  return group_->stats().sentences - before;
}

std::string PythonTranslator::model_kind() const {
  const ModelKind kind = group_->model_file().config().kind;
  return kind == ModelKind::DecoderOnly ? "decoder-only" : "encoder-decoder";
}

}  // namespace seqtrans::python
