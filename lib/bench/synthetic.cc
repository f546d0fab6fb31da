#include "bench/synthetic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "models/engine_model.h"
#include "models/tensor_specs.h"
#include "ops/runtime.h"
#include "search/search.h"

namespace seqtrans::bench {
namespace {

using Clock = std::chrono::steady_clock;

int largest(const std::vector<int>& values) { return *std::max_element(values.begin(), values.end()); }

void check_positive(const std::vector<int>& values, const char* what) {
  SEQTRANS_CHECK(!values.empty(), "synthetic benchmark: no {} given", what);
  for (int value : values) SEQTRANS_CHECK(value >= 1, "synthetic benchmark: {} {} must be at least 1", what, value);
}

// One model per engine setting, built on first use: the fused output layer and the top-k algorithm are
// model options. Weights are uploaded once per setting, outside any timing.
class ModelPool {
 public:
  ModelPool(const ModelFile& file, const ModelOptions& base) : file_(file), base_(base) {}

  EngineModel& get(const EngineSettings& settings) {
    for (auto& [key, model] : models_)
      if (key == settings) return *model;
    ModelOptions options = base_;
    SearchOptions unused;
    apply(settings, options, unused);
    models_.emplace_back(settings, make_engine_model(file_, options));
    return *models_.back().second;
  }

 private:
  const ModelFile& file_;
  ModelOptions base_;
  std::vector<std::pair<EngineSettings, std::unique_ptr<EngineModel>>> models_;
};

// One search of the whole batch, timed; checks that every sentence got exactly target_length tokens.
double timed_search(EngineModel& model, const std::vector<std::vector<int32_t>>& sources,
                    const SearchOptions& search_options, const GridPoint& point) {
  const auto start = Clock::now();
  const std::vector<SearchResult> results = search(model, sources, search_options);
  synchronize_devices();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const SearchResult& result : results) check_forced_length(result, point.target_length);
  return seconds;
}

// Timings of one grid point under different engine settings.
class PointMeasurements {
 public:
  PointMeasurements(ModelPool& models, const GridPoint& point, std::vector<std::vector<int32_t>> sources,
                    const Repetitions& repetitions)
      : models_(models), point_(point), sources_(std::move(sources)), repetitions_(repetitions) {}

  TimingSummary time(const EngineSettings& settings) {
    return summarize(time_runs(repetitions_, runner(settings)));
  }

  // With and without the idea, timed alternately.
  AblationResult ablate(const Ablation& ablation) {
    const auto [with_idea, without_idea] =
        time_interleaved(repetitions_, runner(ablation.with_idea), runner(ablation.without_idea));
    return AblationResult{ablation.name, ablation.idea, summarize(with_idea), summarize(without_idea)};
  }

  StageProfile profile(const EngineSettings& settings) {
    EngineModel& model = models_.get(settings);
    const SearchOptions search_options = forced_length_search(point_, settings);
    return profile_run([&](double& seconds) {
      seconds = timed_search(model, sources_, search_options, point_);
      return seconds;
    });
  }

 private:
  // One timed search under `settings`.
  std::function<double()> runner(const EngineSettings& settings) {
    EngineModel& model = models_.get(settings);
    return [this, &model, search_options = forced_length_search(point_, settings)] {
      return timed_search(model, sources_, search_options, point_);
    };
  }

  ModelPool& models_;
  GridPoint point_;
  std::vector<std::vector<int32_t>> sources_;
  Repetitions repetitions_;
};

}  // namespace

SyntheticModel synthetic_preset(const std::string& name) {
  SyntheticModel model;  // transformer-base
  if (name == "transformer-base") return model;
  if (name == "tinyllama-1.1b" || name == "llama2-7b") {
    const bool tiny = name == "tinyllama-1.1b";
    model.family = SyntheticFamily::Llama;
    model.encoder_layers = 0;
    model.decoder_layers = tiny ? 22 : 32;
    model.d_model = tiny ? 2048 : 4096;
    model.heads = 32;
    model.kv_heads = tiny ? 4 : 32;
    model.ffn = tiny ? 5632 : 11008;
    return model;
  }
  SEQTRANS_CHECK(name == "nllb-600m" || name == "mbart-large",
                 "--preset: '{}' is not transformer-base, nllb-600m, mbart-large, tinyllama-1.1b or llama2-7b", name);
  model.encoder_layers = model.decoder_layers = 12;
  model.d_model = 1024;
  model.heads = 16;
  model.ffn = 4096;
  model.vocab = name == "nllb-600m" ? 256206 : 250054;
  model.family = name == "nllb-600m" ? SyntheticFamily::M2M100 : SyntheticFamily::MBart;
  return model;
}

SyntheticFamily synthetic_family(const std::string& name) {
  if (name == "marian") return SyntheticFamily::Marian;
  if (name == "m2m100") return SyntheticFamily::M2M100;
  if (name == "llama") return SyntheticFamily::Llama;
  SEQTRANS_CHECK(name == "mbart", "--family: '{}' is not marian, m2m100, mbart or llama", name);
  return SyntheticFamily::MBart;
}

namespace {

// Llama's conventions: BOS 1, EOS 2, unknown 0, RMS norms (epsilon 1e-5), rotary base 10,000, no biases,
// an untied output layer.
ModelConfig llama_config(const SyntheticModel& model, int max_positions) {
  ModelConfig config;
  config.kind = ModelKind::DecoderOnly;
  config.d_model = model.d_model;
  config.decoder = {model.decoder_layers, model.heads, model.ffn, true, true, false, model.kv_heads, 0};
  config.activation = Activation::Swish;
  config.norm = NormKind::RmsNorm;
  config.rope_theta = 10000.0f;
  config.gated_ffn = true;
  config.attention_bias = config.ffn_bias = false;
  config.max_positions = max_positions;
  config.source_vocab_size = 0;
  config.target_vocab_size = model.vocab;
  config.shared_embeddings = false;
  config.tied_output = false;
  config.embedding_scale = 1.0f;
  config.unk_id = 0;
  config.bos_id = 1;
  config.eos_id = config.decoder_start_id = 2;
  config.pad_id = -1;
  config.suppressed_ids = {0};
  return config;
}

}  // namespace

ModelConfig synthetic_config(const SyntheticModel& model, int max_positions) {
  if (model.family == SyntheticFamily::Llama) return llama_config(model, max_positions);
  ModelConfig config = transformer_base_config();
  const bool pre_norm = model.family != SyntheticFamily::Marian, mbart = model.family == SyntheticFamily::MBart;
  config.d_model = model.d_model;
  config.encoder = {model.encoder_layers, model.heads, model.ffn, pre_norm, pre_norm, mbart};
  config.decoder = {model.decoder_layers, model.heads, model.ffn, pre_norm, pre_norm, mbart};
  config.embedding_scale = std::sqrt(static_cast<float>(model.d_model));
  config.max_positions = max_positions;
  config.source_vocab_size = config.target_vocab_size = model.vocab;
  config.pad_id = config.decoder_start_id = model.vocab - 1;
  config.suppressed_ids = {model.vocab - 1};
  if (model.family == SyntheticFamily::M2M100) {
    config.activation = Activation::Relu;
    config.position_encoding = PositionEncoding::SinusoidalFairseq;
    config.position_offset = 2;
  } else if (mbart) {
    config.activation = Activation::Gelu;
    config.position_encoding = PositionEncoding::Learned;
    config.position_offset = 2;
    config.output_bias = true;
  }
  return config;
}

// Source ids drawn uniformly from the ordinary tokens (never EOS, unknown or pad), each sentence ending
// with EOS as tokenized sources do.
std::vector<std::vector<int32_t>> random_sources(const ModelConfig& config, const GridPoint& point, uint64_t seed) {
  std::mt19937_64 generator(seed * 1000003u + static_cast<uint64_t>(point.batch) * 1009u +
                            static_cast<uint64_t>(point.source_length));
  const bool prompts = config.kind == ModelKind::DecoderOnly;
  std::uniform_int_distribution<int32_t> token(3, config.target_vocab_size - 2);
  std::vector<std::vector<int32_t>> sources(static_cast<size_t>(point.batch));
  for (std::vector<int32_t>& source : sources) {
    if (prompts) source.push_back(config.bos_id);
    for (int i = 0; i + 1 < point.source_length; ++i) source.push_back(token(generator));
    if (!prompts) source.push_back(config.eos_id);
  }
  return sources;
}

// EOS is suppressed before target_length tokens and the maximum length is target_length, so every
// sentence generates exactly target_length tokens (Hugging Face: min_new_tokens = max_new_tokens).
SearchOptions forced_length_search(const GridPoint& point, const EngineSettings& settings) {
  SearchOptions search;
  search.beam_size = point.beam;
  search.num_hypotheses = 1;
  search.min_length = point.target_length;
  search.max_length_a = point.target_length;
  search.max_length_b = 0.0f;
  ModelOptions unused;
  apply(settings, unused, search);
  return search;
}

void check_forced_length(const SearchResult& result, int target_length) {
  SEQTRANS_CHECK(!result.hypotheses.empty() && static_cast<int>(result.hypotheses.front().tokens.size()) == target_length,
                 "synthetic benchmark: a sentence generated {} tokens instead of the forced {}",
                 result.hypotheses.empty() ? 0 : result.hypotheses.front().tokens.size(), target_length);
}

ModelFile prepare_synthetic_model(const ModelConfig& config, const SyntheticTarget& target, uint64_t seed) {
  if (target.cpu_threads > 0) ops::set_cpu_threads(target.cpu_threads);
  ops::initialize_device(target.device, target.device_index, /*reserve_bytes=*/0);
  return make_random_model(config, RandomModelOptions{seed, 0.05f, /*quick=*/true});
}

void validate_shape(const SyntheticModel& model, int largest_beam) {
  const bool llama = model.family == SyntheticFamily::Llama;
  SEQTRANS_CHECK((model.encoder_layers >= 1 || llama) && model.decoder_layers >= 1,
                 "synthetic benchmark: layers {},{} must be at least 1 each", model.encoder_layers,
                 model.decoder_layers);
  SEQTRANS_CHECK(!llama || (model.kv_heads >= 0 && (model.kv_heads == 0 || model.heads % model.kv_heads == 0)),
                 "synthetic benchmark: heads {} must be a multiple of the key/value heads {}", model.heads,
                 model.kv_heads);
  SEQTRANS_CHECK(model.d_model >= 1 && model.heads >= 1 && model.d_model % model.heads == 0,
                 "synthetic benchmark: d_model {} must be a positive multiple of heads {}", model.d_model, model.heads);
  SEQTRANS_CHECK(model.ffn >= 1, "synthetic benchmark: ffn {} must be at least 1", model.ffn);
  // Ids 0 (EOS) and vocab - 1 (pad) are never candidates; beam search wants 2 x beam candidates per step.
  const int needed = std::max(4, 2 * largest_beam + 2);
  SEQTRANS_CHECK(model.vocab >= needed, "synthetic benchmark: vocab {} is too small for beam {} (needs {})",
                 model.vocab, largest_beam, needed);
}

void validate(const SyntheticOptions& options) {
  check_positive(options.grid.batch, "batch");
  check_positive(options.grid.beam, "beam");
  check_positive(options.grid.source_length, "source length");
  check_positive(options.grid.target_length, "target length");
  validate_shape(options.model, largest(options.grid.beam));
  SEQTRANS_CHECK(options.repetitions.runs >= 1, "synthetic benchmark: runs {} must be at least 1",
                 options.repetitions.runs);
  SEQTRANS_CHECK(options.repetitions.warmup >= 0, "synthetic benchmark: warm-up runs {} must be at least 0",
                 options.repetitions.warmup);
}

ModelOptions synthetic_model_options(const SyntheticTarget& target) {
  ModelOptions options;
  options.device = target.device;
  options.dtype = target.dtype;
  options.int8_weights = target.int8_weights;
  return options;
}

SyntheticReport run_synthetic(const SyntheticOptions& options, const std::function<void(const std::string&)>& progress) {
  validate(options);
  const SyntheticGrid& grid = options.grid;
  const int max_positions =
      std::max({1024, largest(grid.source_length), largest(grid.target_length) + 1});
  SyntheticReport report;
  report.config = synthetic_config(options.model, max_positions);
  const ModelShape shape = model_shape(report.config);
  const ElementBytes element_bytes = element_bytes_of(options.target.dtype, options.target.int8_weights);
  const std::vector<Ablation> chosen_ablations =
      ablations_to_run(options.ablations, options.engine, options.target.device, Workload::SyntheticBatch,
                       report.config.target_vocab_size, options.only_ablations);

  const ModelFile file =
      prepare_synthetic_model(report.config, options.target, options.seed);
  ModelPool models(file, synthetic_model_options(options.target));

  for (int source_length : grid.source_length)
    for (int target_length : grid.target_length)
      for (int beam : grid.beam)
        for (int batch : grid.batch) {
          const GridPoint point{batch, beam, source_length, target_length};
          PointMeasurements measurements(models, point, random_sources(report.config, point, options.seed),
                                         options.repetitions);
          SyntheticResult result;
          result.point = point;
          result.time = measurements.time(options.engine);
          result.generated_tokens_per_second = static_cast<double>(batch) * target_length / result.time.median;
          result.sentences_per_second = static_cast<double>(batch) / result.time.median;
          result.seconds_per_step = result.time.median / target_length;
          result.memory = peak_memory(options.target.device);
          const SyntheticWorkload workload{batch, beam, source_length, target_length};
          result.floor = make_floor(report.config.kind == ModelKind::DecoderOnly
                                        ? decoder_only_cost(report.config, workload, element_bytes)
                                        : synthetic_cost(shape, workload, element_bytes),
                                    options.hardware);
          if (options.repetitions.profile) result.profile = measurements.profile(options.engine);
          for (const Ablation& ablation : chosen_ablations) result.ablations.push_back(measurements.ablate(ablation));
          if (progress)
            progress(fmt::format("batch {} beam {} source {} target {}: {:.2f} ms, {:.0f} generated tokens/s", batch,
                                 beam, source_length, target_length, 1e3 * result.time.median,
                                 result.generated_tokens_per_second));
          report.results.push_back(std::move(result));
        }
  return report;
}

}  // namespace seqtrans::bench
