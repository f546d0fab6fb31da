#include "bench_command.h"

#include <iostream>
#include <optional>

#include "bench/arrivals.h"
#include "bench/cpu_peaks.h"
#include "bench/prefill_stall.h"
#include "bench/records.h"
#include "bench/synthetic.h"
#include "bench/synthetic_arrivals.h"
#include "bench_report.h"
#include "cpu/thread_pool.h"
#include "models/tensor_specs.h"
#include "ops/runtime.h"
#include "output_file.h"
#include "prompt_text.h"

namespace seqtrans::app {
namespace {

// Hardware ceilings measured on an H200 (docs/BENCHMARKS.md, "Hardware ceilings"): cuBLAS fp16 GEMM and a
// device-to-device copy (bytes read + written); test/ops/cuda_bench.cc "[ceilings]" measures them anywhere.
constexpr double kH200Fp16Tflops = 764;
constexpr double kH200BandwidthGbs = 4270;

bench::EngineSettings engine_settings(const BenchOptions& options) {
  bench::EngineSettings engine;
  engine.batching = options.common.translator.batching_mode;
  engine.shrink_batch = !options.naive_batching;
  // Done sentences can keep their rows only until a batch ends: naive batching is batch by batch.
  if (options.naive_batching) engine.batching = Batching::Shrinking;
  EngineTuning& tuning = engine.tuning;
  tuning.fused_output = !options.no_fused_topk;
  if (options.no_hierarchical_topk) tuning.topk_algorithm = ops::TopkAlgorithm::FullScan;
  tuning.cuda_graphs = !options.no_cuda_graphs;
  tuning.overlapped_launches = !options.no_overlapped_launches;
  tuning.packed_encoder = !options.no_packed_encoder;
  tuning.persistent_decode_rows = options.no_persistent_decode ? 0 : options.persistent_decode_rows;
  if (options.no_steps_at_once) tuning.steps_per_read = 1;
  tuning.persistent_argmax = !options.no_persistent_argmax;
  tuning.batch_invariant = options.common.translator.model.tuning.batch_invariant;
  tuning.prefill_chunk_tokens = options.prefill_chunk;
  tuning.packed_weights = !options.no_packed_weights;
  return engine;
}

// A decoder-only model's input lines are prompts, read as `seqtrans generate` reads them (\n and \\ escapes).
bench::LineText line_text_for(const std::string& model_path) {
  if (ModelFile::open(model_path).config().kind != ModelKind::DecoderOnly) return {};
  return [](const std::string& line, size_t /*index*/) { return unescape_line(line); };
}

// The peak rates behind the floor: the flags, else the measured H200 values for fp16 on a GPU, else none.
bench::Hardware resolve_hardware(const BenchOptions& options, std::string& source) {
  SEQTRANS_CHECK((options.peak_tflops > 0) == (options.peak_bandwidth_gbs > 0),
                 "give both --peak-tflops and --peak-bandwidth-gbs, or neither");
  bench::Hardware hardware;
  const TranslatorOptions& translator = options.common.translator;
  if (options.peak_tflops > 0) {
    hardware = {options.peak_tflops * 1e12, options.peak_bandwidth_gbs * 1e9};
    source = "--peak-tflops, --peak-bandwidth-gbs";
  } else if (translator.device == Device::CPU) {
    if (translator.cpu_threads > 0) ops::set_cpu_threads(translator.cpu_threads);  // the threads the run uses
    hardware = bench::cpu_peaks();
    source = fmt::format("measured on this CPU at start with {} threads: fp32 GEMM, 128 MiB copy; or pass "
                         "--peak-tflops and --peak-bandwidth-gbs", cpu::threads());
  } else if (translator.device == Device::CUDA && translator.dtype == DataType::F16) {
    hardware = {kH200Fp16Tflops * 1e12, kH200BandwidthGbs * 1e9};
    source = "measured on an H200, docs/BENCHMARKS.md; pass --peak-tflops and --peak-bandwidth-gbs for another GPU";
  } else {
    source = "no peak rates for fp32: pass --peak-tflops and --peak-bandwidth-gbs";
  }
  return hardware;
}

void write_outputs(const BenchOptions& options, const bench::RunDescription& run, const ModelConfig& config,
                   const std::vector<bench::Row>& results, const std::vector<bench::Row>& ablation_rows,
                   const std::vector<bench::Row>& arrival_rows = {}) {
  if (!options.json.empty()) {
    const std::unique_ptr<OutputTarget> out = open_output(options.json);
    bench::write_json(out->stream(), run, config, results, ablation_rows, arrival_rows);
    out->commit();
  }
  // The CSV holds one table: the arrival rows where there are some (no run has both), else the results.
  if (!options.csv.empty()) {
    const std::unique_ptr<OutputTarget> out = open_output(options.csv);
    bench::write_csv(out->stream(), arrival_rows.empty() ? results : arrival_rows);
    out->commit();
  }
}

// A measurement of one engine: --device must name one device.
void require_one_device(const CommonOptions& common, const char* measurement) {
  SEQTRANS_CHECK(common.devices.indices.size() == 1, "{} measures one device; --device {} names {}", measurement,
                 common.text.device, common.devices.indices.size());
}

// What every --synthetic run refuses: a model file and input or output files.
void check_synthetic_inputs(const BenchOptions& options) {
  SEQTRANS_CHECK(options.command->count("--model") == 0, "--synthetic uses random weights, not a model file (-m)");
  SEQTRANS_CHECK(options.input.empty() && options.output.empty(), "--synthetic reads no input file (-i, -o)");
}

// The synthetic shape: --preset's, with the shape flags given beside it replacing its values.
bench::SyntheticModel synthetic_model(const BenchOptions& options) {
  bench::SyntheticModel model = bench::synthetic_preset(options.preset.empty() ? "transformer-base" : options.preset);
  const auto given = [&](const char* flag) { return options.preset.empty() || options.command->count(flag) > 0; };
  if (given("--family")) model.family = bench::synthetic_family(options.family);
  const bool decoder_only = model.family == bench::SyntheticFamily::Llama;
  if (given("--layers")) {
    model.encoder_layers = decoder_only ? 0 : options.layers.front();
    model.decoder_layers = options.layers.back();
  }
  if (given("--kv-heads")) model.kv_heads = options.kv_heads;
  if (given("--d-model")) model.d_model = options.d_model;
  if (given("--heads")) model.heads = options.heads;
  if (given("--ffn")) model.ffn = options.ffn;
  if (given("--vocab")) model.vocab = options.vocab;
  return model;
}

// Where --device and --precision put a synthetic run's engines.
bench::SyntheticTarget synthetic_target(const CommonOptions& common) {
  return {common.translator.device, common.translator.device_index, common.translator.dtype,
          common.translator.model.int8_weights, common.translator.cpu_threads};
}

int run_synthetic_bench(BenchOptions& options, bench::RunDescription& run) {
  const CommonOptions& common = options.common;
  SEQTRANS_CHECK(options.command->count("--beam-size") == 0, "--synthetic takes beams as a list: --beam 1,4");
  check_synthetic_inputs(options);
  require_one_device(common, "--synthetic");
  bench::SyntheticOptions synthetic;
  synthetic.model = synthetic_model(options);
  synthetic.grid = {options.batch, options.beam, options.source_length, options.target_length};
  synthetic.repetitions = {options.runs > 0 ? options.runs : 5, options.warmup >= 0 ? options.warmup : 2,
                           options.profile};
  synthetic.target = synthetic_target(common);
  synthetic.engine = run.engine;
  synthetic.ablations = options.ablations || !options.only_ablations.empty();
  synthetic.only_ablations = options.only_ablations;
  synthetic.hardware = run.hardware;
  run.mode = "synthetic";
  run.repetitions = synthetic.repetitions;

  const auto progress = [&](const std::string& line) { log(common, LogLevel::Info, line); };
  const bench::SyntheticReport report = bench::run_synthetic(synthetic, progress);
  note_setup_choices(common);
  print_synthetic_report(std::cout, run, report);

  std::vector<bench::Row> results, ablation_rows;
  for (const bench::SyntheticResult& result : report.results) {
    results.push_back(bench::synthetic_row(result));
    for (bench::Row& row : bench::synthetic_ablation_rows(result)) ablation_rows.push_back(std::move(row));
  }
  write_outputs(options, run, report.config, results, ablation_rows);
  return 0;
}

// --prefill-stall: the chunk-size table on -m's decoder-only model, or with --synthetic on random weights of
// the shape given (2,048 positions); --source-length is the long prompt's.
int run_prefill_stall_bench(BenchOptions& options) {
  const CommonOptions& common = options.common;
  require_one_device(common, "--prefill-stall");
  ops::initialize_device(common.translator.device, common.translator.device_index, /*reserve_bytes=*/0);
  if (common.translator.device == Device::CPU && common.translator.cpu_threads > 0)
    ops::set_cpu_threads(common.translator.cpu_threads);
  const ModelFile file = options.synthetic ? make_random_model(bench::synthetic_config(synthetic_model(options), 2048),
                                                               RandomModelOptions{1, 0.05f, /*quick=*/true})
                                           : ModelFile::open(common.translator.model_path);
  bench::PrefillStallOptions stall;
  stall.device = common.translator.device;
  stall.dtype = common.translator.dtype;
  if (options.command->count("--source-length") > 0) stall.prompt_tokens = options.source_length.front();
  bench::run_prefill_stall(file, stall, std::cout);
  return 0;
}

// What both arrival simulations refuse: the throughput runs' repetitions, profile and ablations, which they
// would otherwise ignore.
void refuse_throughput_flags(const BenchOptions& options) {
  for (const char* flag : {"--runs", "--warmup", "--profile", "--ablations", "--ablation", "--naive-batching"})
    SEQTRANS_CHECK(options.command->count(flag) == 0,
                   "--arrival-rate runs each rate once in each batching mode; {} belongs to the throughput runs", flag);
}

// Real mode with --arrival-rate: the arrival simulation under both batching modes, in place of the
// throughput runs.
int run_arrival_bench(BenchOptions& options, bench::RunDescription& run) {
  const CommonOptions& common = options.common;
  require_one_device(common, "--arrival-rate");
  refuse_throughput_flags(options);
  bench::ArrivalOptions arrivals;
  arrivals.translator = common.translator;
  arrivals.translator.model.tuning = run.engine.tuning;
  arrivals.input = options.input;
  arrivals.line_text = line_text_for(common.translator.model_path);
  arrivals.rates = options.arrival_rates;
  arrivals.seed = options.arrival_seed;
  run.mode = "arrivals";
  run.input = options.input;
  run.model = common.translator.model_path;
  const auto progress = [&](const std::string& line) { log(common, LogLevel::Info, line); };
  const std::vector<bench::ArrivalResult> results = bench::run_arrivals(arrivals, progress);
  note_setup_choices(common);
  print_arrival_report(std::cout, run, results);
  std::vector<bench::Row> rows;
  for (const bench::ArrivalResult& result : results) rows.push_back(bench::arrival_row(result));
  const ModelConfig config = ModelFile::open(common.translator.model_path).config();
  write_outputs(options, run, config, {}, {}, rows);
  return 0;
}

// --arrival-batching's names, as CLI11 checked them, in the order given.
std::vector<bench::ArrivalBatching> arrival_modes(const std::vector<std::string>& names) {
  std::vector<bench::ArrivalBatching> modes;
  for (const std::string& name : names)
    if (const std::optional<bench::ArrivalBatching> mode = bench::arrival_batching_named(name)) modes.push_back(*mode);
  return modes;
}

// --synthetic with --arrival-rate: the arrival simulation at a shape (bench/synthetic_arrivals.h) in place of
// the grid. Sentences arrive one by one, so the budget in flight and the beam are a real run's
// (--max-batch-size, --max-batch-tokens, --min-join, -b), and one length each stands for the lines.
int run_synthetic_arrival_bench(BenchOptions& options, bench::RunDescription& run) {
  const CommonOptions& common = options.common;
  check_synthetic_inputs(options);
  require_one_device(common, "--arrival-rate");
  for (const char* flag : {"--batch", "--beam"})
    SEQTRANS_CHECK(options.command->count(flag) == 0,
                   "--arrival-rate sends sentences one by one: {} is the grid's; the budget in flight is "
                   "--max-batch-size and the beam -b",
                   flag);
  refuse_throughput_flags(options);
  SEQTRANS_CHECK(options.source_length.size() == 1 && options.target_length.size() == 1,
                 "--arrival-rate with --synthetic takes one --source-length and one --target-length, not lists");
  bench::SyntheticArrivalOptions arrivals;
  arrivals.model = synthetic_model(options);
  arrivals.target = synthetic_target(common);
  arrivals.engine = run.engine;
  arrivals.budget = scheduler_options(common.translator);
  arrivals.beam = common.translator.search.beam_size;
  arrivals.source_length = options.source_length.front();
  arrivals.target_length = options.target_length.front();
  arrivals.lines = options.arrival_lines;
  arrivals.rates = options.arrival_rates;
  arrivals.arrival_seed = options.arrival_seed;
  if (!options.arrival_batching.empty()) arrivals.modes = arrival_modes(options.arrival_batching);
  run.mode = "synthetic-arrivals";
  run.repetitions = {1, 1, false};  // each rate once, after one untimed pass per mode
  run.input = fmt::format("{} random {} of {} tokens, {} generated each (forced), beam {}", arrivals.lines,
                          arrivals.model.family == bench::SyntheticFamily::Llama ? "prompts" : "sources",
                          arrivals.source_length, arrivals.target_length, arrivals.beam);

  const auto progress = [&](const std::string& line) { log(common, LogLevel::Info, line); };
  const bench::SyntheticArrivalReport report = bench::run_synthetic_arrivals(arrivals, progress);
  note_setup_choices(common);
  print_arrival_report(std::cout, run, report.results, &report.config);
  std::vector<bench::Row> rows;
  for (const bench::ArrivalResult& result : report.results) rows.push_back(bench::arrival_row(result));
  write_outputs(options, run, report.config, {}, {}, rows);
  return 0;
}

int run_real_bench(BenchOptions& options, bench::RunDescription& run) {
  const CommonOptions& common = options.common;
  SEQTRANS_CHECK(!options.input.empty(), "bench needs -i FILE (a real workload) or --synthetic");
  for (const char* flag : {"--layers", "--d-model", "--heads", "--ffn", "--vocab", "--batch", "--beam",
                           "--source-length", "--target-length"})
    SEQTRANS_CHECK(options.command->count(flag) == 0,
                   "{} shapes the synthetic model; add --synthetic (a real run takes -b, --max-batch-size)", flag);
  if (!options.arrival_rates.empty()) return run_arrival_bench(options, run);
  // The stage profiler is one per process: it times one engine's stages, not several at once.
  SEQTRANS_CHECK(!options.profile || common.devices.indices.size() == 1, "--profile measures one device; --device {} names {}",
                 common.text.device, common.devices.indices.size());
  bench::RealOptions real;
  real.translator = common.translator;
  real.device_indices = common.devices.indices;
  real.input = options.input;
  real.line_text = line_text_for(common.translator.model_path);
  real.repetitions = {options.runs > 0 ? options.runs : 3, options.warmup >= 0 ? options.warmup : 1, options.profile};
  real.engine = run.engine;
  real.ablations = options.ablations || !options.only_ablations.empty();
  real.only_ablations = options.only_ablations;
  real.hardware = run.hardware;
  run.mode = "real";
  run.repetitions = real.repetitions;
  run.input = options.input;
  run.model = common.translator.model_path;

  const auto progress = [&](const std::string& line) { log(common, LogLevel::Info, line); };
  const bench::RealReport report = bench::run_real(real, progress);
  note_setup_choices(common);
  print_real_report(std::cout, run, report, common.translator);

  if (!options.output.empty()) {
    const std::unique_ptr<OutputTarget> out = open_output(options.output);
    for (const Translation& translation : report.translations) {
      std::string text = translation.texts.empty() ? "" : translation.texts.front();
      for (char& c : text)
        if (c == '\n' || c == '\r') c = ' ';
      out->stream() << text << '\n';
    }
    out->commit();
  }
  write_outputs(options, run, report.config, {bench::real_row(report)}, bench::real_ablation_rows(report));
  return 0;
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App* command = app.add_subcommand("bench", "Measure translation speed: a real file or a synthetic grid");
  options.command = command;
  command->footer(
      "Examples:\n"
      "  seqtrans bench -m model.seqtrans -i newstest2014.en -b 4 --max-batch-size 32 --profile\n"
      "  seqtrans bench --synthetic                                  (Transformer-base, batch 1,16,64,128 x beam 1,4)\n"
      "  seqtrans bench --synthetic --batch 64 --beam 4 --ablations --json out.json --csv out.csv\n"
      "  seqtrans bench --synthetic --device cpu --layers 2,2 --d-model 64 --heads 4 --ffn 128 --vocab 500 \\\n"
      "      --batch 1,4 --beam 1,2 --source-length 8 --target-length 8 --runs 2 --warmup 1\n"
      "  seqtrans bench --synthetic --preset tinyllama-1.1b -b 1 --source-length 128 --target-length 128 \\\n"
      "      --arrival-rate 2,5,10 --arrival-lines 500\n"
      "\nReal mode translates the file as `translate` does (tokenization included) and discards the output\n"
      "unless -o is given. Synthetic mode uses random weights and random source ids, and forces exactly\n"
      "--target-length output tokens. With --arrival-rate it sends --arrival-lines random sentences at Poisson\n"
      "times instead of a grid, and reports latency under iteration, shrinking and one-at-a-time batching.\n"
      "Times are medians of --runs after --warmup runs. \"x of floor\" is the measured time over the\n"
      "hardware floor max(FLOPs / peak FLOP rate, bytes / peak bandwidth); docs/BENCHMARKS.md describes\n"
      "the model.");
  command->add_option("-i,--input", options.input, "Real mode: the text file to translate")->check(CLI::ExistingFile);
  command->add_option("-o,--output", options.output, "Real mode: write the translations here (default: discarded)");
  command->add_flag("--synthetic", options.synthetic, "Random-weight model and random inputs over a grid; no model file");

  const char* synthetic_group = "Synthetic model and grid";
  command->add_option("--preset", options.preset,
                      "A named shape: transformer-base (the default), nllb-600m (NLLB-200-distilled-600M), "
                      "mbart-large (mBART-50), or the decoder-only tinyllama-1.1b and llama2-7b (--source-length is "
                      "then the prompt's); shape flags given beside it replace its values")
      ->group(synthetic_group);
  command->add_option("--family", options.family,
                      "The layout: marian (post-norm, sinusoids), m2m100 (NLLB-200 and M2M-100: pre-norm, fairseq "
                      "sinusoids), mbart (pre-norm, embedding norm, learned positions) or llama (decoder-only: RMS "
                      "norms, rotary positions, grouped-query attention, SwiGLU; --layers is its decoder's)")
      ->check(CLI::IsMember({"marian", "m2m100", "mbart", "llama"}))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--layers", options.layers, "Encoder,decoder layers (one number: both)")
      ->delimiter(',')
      ->expected(1, 2)
      ->check(CLI::Range(1, 1024))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--d-model", options.d_model, "Model width")->check(CLI::Range(1, 1 << 16))->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--heads", options.heads, "Attention heads")->check(CLI::Range(1, 1024))->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--kv-heads", options.kv_heads,
                      "llama: key/value heads, a divisor of --heads (grouped-query attention; 0: as many as --heads)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--ffn", options.ffn, "Feed-forward width")->check(CLI::Range(1, 1 << 18))->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--vocab", options.vocab, "Vocabulary (shared, tied output layer)")
      ->check(CLI::Range(4, 1 << 24))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--batch", options.batch, "Sentences per batch, a list")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--beam", options.beam, "Beam sizes, a list (1 = greedy)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--source-length", options.source_length,
                      "Source tokens per sentence (EOS included), a list (one with --arrival-rate)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str()
      ->group(synthetic_group);
  command->add_option("--target-length", options.target_length,
                      "Generated tokens per sentence, forced; a list (one with --arrival-rate)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str()
      ->group(synthetic_group);

  const char* measure_group = "Measurement";
  command->add_option("--runs", options.runs, "Timed runs; the median is reported (default: 5 synthetic, 3 real)")
      ->check(CLI::Range(1, 100000))
      ->group(measure_group);
  command->add_option("--warmup", options.warmup, "Untimed runs first (default: 2 synthetic, 1 real)")
      ->check(CLI::Range(0, 100000))
      ->group(measure_group);
  command->add_flag("--profile", options.profile,
                    "One more run with the stage profiler: time per stage (it synchronizes, so it runs slower)")
      ->group(measure_group);
  command->add_flag("--ablations", options.ablations,
                    "Also run the workload with each idea turned off and print each idea's speedup")
      ->group(measure_group);
  command
      ->add_option("--ablation", options.only_ablations,
                   "Only this ablation, by its flag without dashes (repeatable; implies --ablations): the run and "
                   "the run without the idea alternate in one process")
      ->delimiter(',')
      ->check(CLI::IsMember(bench::ablation_names()))
      ->group(measure_group);
  command->add_flag("--naive-batching", options.naive_batching,
                    "Finished sentences stay in the batch until all finish (results unchanged)")
      ->group(measure_group);
  command->add_flag("--no-fused-topk", options.no_fused_topk,
                    "Copy full logits to the host and select there instead of the fused output layer")
      ->group(measure_group);
  command->add_flag("--no-hierarchical-topk", options.no_hierarchical_topk, "Top-k by a full scan of every row")
      ->group(measure_group);
  command->add_flag("--no-cuda-graphs", options.no_cuda_graphs,
                    "Launch every op of a decoder step instead of replaying the step as one CUDA graph")
      ->group(measure_group);
  command->add_flag("--no-overlapped-launches", options.no_overlapped_launches,
                    "Launch each kernel after the one before it has finished, instead of letting it load its weights "
                    "meanwhile")
      ->group(measure_group);
  command->add_flag("--no-persistent-decode", options.no_persistent_decode,
                    "Run small decoder steps layer by layer instead of in one persistent kernel")
      ->group(measure_group);
  command->add_flag("--no-steps-at-once", options.no_steps_at_once,
                    fmt::format("Greedy search reads every step instead of running {} at once on the GPU, each fed "
                                "the last one's tokens on the device, while no sentence waits to join",
                                kGreedyStepsPerRead))
      ->group(measure_group);
  command->add_flag("--no-persistent-argmax", options.no_persistent_argmax,
                    "Greedy steps in the persistent kernel run the output layer (logits, normalizer, argmax) as "
                    "kernels of their own instead of inside it")
      ->group(measure_group);
  command->add_flag("--no-packed-weights", options.no_packed_weights,
                    "CPU: products pack the panels of the weights they read at every call instead of once "
                    "(same results)")
      ->group(measure_group);
  command->add_option("--persistent-decode-rows", options.persistent_decode_rows,
                      fmt::format("Steps of at most N rows run through the persistent kernel (at most {})",
                                  ops::kPersistentDecoderMaxRows))
      ->default_str(fmt::format("{} in fp16, {} in fp32: the measured crossovers", kPersistentDecodeRowsF16,
                                kPersistentDecodeRowsF32))
      ->check(CLI::Range(int64_t{0}, ops::kPersistentDecoderMaxRows))
      ->group(measure_group);
  command->add_flag("--no-packed-encoder", options.no_packed_encoder,
                    "Encode each group of sentences padded to its longest instead of packed without padding")
      ->group(measure_group);
  command->add_option("--prefill-chunk", options.prefill_chunk,
                      "Decoder-only models: prompt tokens prefilled between two decoder steps, so that a joining "
                      "prompt does not stall the rows decoding (0: each prompt whole when it joins)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(measure_group);
  command->add_option("--peak-tflops", options.peak_tflops,
                      "Peak matrix FLOP rate for the floor (default on a GPU in fp16: 764, measured on an H200)")
      ->check(CLI::PositiveNumber)
      ->group(measure_group);
  command->add_option("--peak-bandwidth-gbs", options.peak_bandwidth_gbs,
                      "Peak memory bandwidth in GB/s for the floor (default on a GPU in fp16: 4270, H200)")
      ->check(CLI::PositiveNumber)
      ->group(measure_group);
  command->add_flag("--prefill-stall", options.prefill_stall,
                    "Decoder-only models: rows decode while one long prompt (--source-length tokens; default half "
                    "the positions) joins; per prefill chunk size, the stall they see against the prefill's "
                    "throughput (the measurement behind --prefill-chunk's default). -m's model, or --synthetic "
                    "random weights (--preset tinyllama-1.1b)")
      ->group(measure_group);
  command->add_option("--arrival-rate", options.arrival_rates,
                      "Lines arrive one by one at Poisson times at R lines/s (a list), and each rate reports latency "
                      "percentiles (arrival to translation). Real mode: the file's lines under iteration and "
                      "shrinking batching. --synthetic: --arrival-lines random sources (or prompts) of one "
                      "--source-length, each generating exactly one --target-length, under iteration, shrinking and "
                      "one-at-a-time batching; beam -b, sentences in flight --max-batch-size")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->group(measure_group);
  command->add_option("--arrival-seed", options.arrival_seed, "Seed of the arrival times")
      ->capture_default_str()
      ->group(measure_group);
  command->add_option("--arrival-lines", options.arrival_lines, "--synthetic --arrival-rate: lines per rate and mode")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str()
      ->group(measure_group);
  command->add_option("--arrival-batching", options.arrival_batching,
                      "--synthetic --arrival-rate: the batching modes to measure, in this order (default all three); "
                      "one-at-a-time takes a line's full time, so leave it out at rates far past what it sustains")
      ->delimiter(',')
      ->check(CLI::IsMember({"iteration", "shrinking", "one-at-a-time"}))
      ->group(measure_group);
  command->add_option("--json", options.json, "Write the results as JSON to this file")->group(measure_group);
  command->add_option("--csv", options.csv, "Write the results as CSV to this file (one row per result)")
      ->group(measure_group);
  add_common_options(*command, options.common);
  return command;
}

int run_bench(BenchOptions& options) {
  CommonOptions& common = options.common;
  resolve_common_options(common);
  bench::RunDescription run;
  run.device = describe(common.devices);
  run.dtype = common.translator.dtype;
  run.int8_weights = common.translator.model.int8_weights;
  run.engine = engine_settings(options);
  run.hardware = resolve_hardware(options, run.hardware_source);
  const bool arrivals = !options.arrival_rates.empty();
  SEQTRANS_CHECK(!options.prefill_stall || !arrivals, "--prefill-stall and --arrival-rate are separate measurements");
  SEQTRANS_CHECK(options.command->count("--arrival-lines") == 0 || (options.synthetic && arrivals),
                 "--arrival-lines sets the lines of --synthetic --arrival-rate (real mode sends the file's)");
  SEQTRANS_CHECK(options.arrival_batching.empty() || (options.synthetic && arrivals),
                 "--arrival-batching picks the modes of --synthetic --arrival-rate (real mode runs iteration and "
                 "shrinking)");
  if (options.prefill_stall) return run_prefill_stall_bench(options);
  if (options.synthetic) return arrivals ? run_synthetic_arrival_bench(options, run) : run_synthetic_bench(options, run);
  return run_real_bench(options, run);
}

}  // namespace seqtrans::app
