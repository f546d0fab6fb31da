#include "translator.h"

#include <algorithm>
#include <chrono>

#include "batching/batch_builder.h"
#include "models/encoder_decoder_model.h"
#include "ops/runtime.h"
#include "models/model_file.h"
#include "search/search.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

extern "C" void openblas_set_num_threads(int threads);

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Device memory taken at start: the weights plus the largest batch's working set (decoder caches for
// every beam up to the model's positions, encoder activations of a full token budget), with headroom.
// The arena still grows if a batch needs more, but a well-sized reservation makes that rare.
size_t device_reservation(const ModelFile& file, const TranslatorOptions& options) {
  const ModelConfig& config = file.config();
  const size_t element = options.dtype == DataType::F16 ? 2 : 4;
  size_t weights = 0;
  for (const auto& [name, tensor] : file.tensors()) weights += static_cast<size_t>(tensor.elements()) * element;
  const size_t slots = options.batching.max_batch_size * static_cast<size_t>(options.search.beam_size);
  const size_t steps = std::min<size_t>(config.max_positions, 256);
  const size_t caches = 2 * slots * steps * config.d_model * element * config.decoder.num_layers;
  // A batch never holds more tokens than its sentence cap times the longest allowed source.
  const size_t batch_tokens = std::min(options.batching.max_batch_tokens,
                                       options.batching.max_batch_size * options.max_input_length);
  const size_t encoder =
      batch_tokens * (4 * config.d_model + std::max(config.encoder.ffn_dim, config.decoder.ffn_dim)) * element * 4;
  // Logits are fp32; each recorded decoder step (CUDA graph) keeps its own, and at most two live at once.
  const size_t logits = slots * static_cast<size_t>(config.target_vocab_size) * sizeof(float);
  return weights + caches + encoder + 3 * logits + (64u << 20);
}


}  // namespace

TokenizerSpec tokenizer_spec(const ModelFile& file) {
  TokenizerSpec spec;
  spec.source_spm = file.tokenizer().source_spm;
  spec.target_spm = file.tokenizer().target_spm;
  spec.source_vocab = file.tokenizer().source_vocab;
  spec.target_vocab = file.tokenizer().target_vocab;
  spec.special_ids = {file.config().eos_id, file.config().unk_id, file.config().pad_id};
  return spec;
}

Translator::Translator(const TranslatorOptions& options) : options_(options) {
  validate(options_.batching);
  SEQTRANS_CHECK(options_.max_input_length >= 1, "--max-input-length must be at least 1");
  if (options_.cpu_threads > 0) openblas_set_num_threads(options_.cpu_threads);
  file_ = std::make_unique<ModelFile>(ModelFile::open(options_.model_path));
  // Before anything sized by the beam: the model's num_beams may replace it.
  setting_sources_ = apply_generation_defaults(file_->generation_defaults(), options_.open_settings, options_.search);
  SEQTRANS_CHECK(options_.search.num_hypotheses <= options_.search.beam_size, "--n-best {} is larger than the beam size {}",
                 options_.search.num_hypotheses, options_.search.beam_size);
  validate_options(options_.search);
  options_.max_input_length =
      std::min(options_.max_input_length, static_cast<size_t>(file_->config().max_positions));
  ops::initialize_device(options_.device, options_.device_index, device_reservation(*file_, options_));
  tokenizer_ = std::make_unique<Tokenizer>(tokenizer_spec(*file_));
  options_.model.device = options_.device;
  options_.model.dtype = options_.dtype;
  model_ = std::make_unique<EncoderDecoderModel>(*file_, options_.model);
}

Translator::~Translator() = default;

std::string Translator::search_settings_summary() const {
  return describe_search_settings(options_.search, setting_sources_, file_->generation_defaults());
}

std::vector<Translation> Translator::translate(const std::vector<Line>& lines,
                                               const std::function<void(const std::string&)>& warn) {
  std::vector<Translation> translations(lines.size());

  auto start = Clock::now();
  std::vector<std::vector<int32_t>> sources(lines.size());
  std::vector<SentenceLength> lengths;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (is_blank(lines[i].text)) continue;  // an empty line in, an empty line out
    sources[i] = tokenizer_->encode_source(lines[i].text);
    const size_t original = sources[i].size();
    if (tokenizer_->truncate_source(sources[i], options_.max_input_length) && warn)
      warn(fmt::format("line {}: {} source tokens, truncated to {} (--max-input-length)", lines[i].index + 1,
                       original, sources[i].size()));
    lengths.push_back({i, sources[i].size()});
    stats_.source_tokens += sources[i].size();
  }
  stats_.tokenize_seconds += seconds_since(start);

  const Batcher batcher(options_.batching);
  for (const Batch& batch : batcher.make_batches(lengths)) {
    std::vector<std::vector<int32_t>> batch_sources;
    for (size_t index : batch.indices) batch_sources.push_back(sources[index]);
    start = Clock::now();
    const std::vector<SearchResult> results = search(*model_, batch_sources, options_.search);
    const double batch_seconds = seconds_since(start);
    stats_.search_seconds += batch_seconds;
    stats_.batch_seconds.push_back(batch_seconds);
    ++stats_.batches;

    start = Clock::now();
    for (size_t j = 0; j < batch.indices.size(); ++j) {
      Translation& translation = translations[batch.indices[j]];
      for (const Hypothesis& hypothesis : results[j].hypotheses) {
        translation.texts.push_back(tokenizer_->decode_target(hypothesis.tokens));
        translation.scores.push_back(hypothesis.score);
      }
      if (!results[j].hypotheses.empty()) stats_.target_tokens += results[j].hypotheses.front().tokens.size();
    }
    stats_.detokenize_seconds += seconds_since(start);
  }
  for (Translation& translation : translations)
    if (translation.texts.empty()) {  // blank input lines
      translation.texts.assign(static_cast<size_t>(options_.search.num_hypotheses), "");
      translation.scores.assign(static_cast<size_t>(options_.search.num_hypotheses), 0.0f);
    }
  stats_.sentences += lines.size();
  return translations;
}

}  // namespace seqtrans
