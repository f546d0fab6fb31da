#include "common_options.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "ops/runtime.h"

namespace seqtrans::app {

std::string default_model_path(ModelKind kind) {
  if (const char* path = std::getenv("SEQTRANS_MODEL"); path != nullptr && *path != '\0') return path;
  return kind == ModelKind::DecoderOnly ? SEQTRANS_DEFAULT_GENERATION_MODEL : SEQTRANS_DEFAULT_MODEL;
}

void add_common_options(CLI::App& command, CommonOptions& options, ModelKind default_kind) {
  TranslatorOptions& translator = options.translator;
  SearchOptions& search = translator.search;
  translator.model_path = default_model_path(default_kind);

  options.model_option =
      command.add_option("-m,--model", translator.model_path, "Model file (convert checkpoints with scripts/convert_hf.py)")
          ->capture_default_str();
  command.add_option("--source-lang", options.languages.source,
                     "Multilingual models (NLLB-200, M2M-100, mBART-50): the source language, by the checkpoint's "
                     "code (eng_Latn, en, en_XX; scripts/inspect_model.py --languages MODEL lists them)");
  command.add_option("--target-lang", options.languages.target,
                     "Multilingual models: the target language, forced as the first generated token (Hugging Face's "
                     "forced_bos_token_id)");
  command.add_option("--device", options.text.device, "auto (GPU when present, else CPU), cpu, cuda, cuda:N, or several GPUs: cuda:all or cuda:N,M,... (one "
                     "engine per GPU, lines dealt to whichever is free, output in input order)")
      ->capture_default_str();
  command.add_option("--precision", options.text.precision, "Compute precision: auto (fp16 on GPU, fp32 on CPU), fp16, fp32, int8 (CPU: int8 weights and products)")
      ->check(CLI::IsMember({"auto", "fp16", "fp32", "int8"}))
      ->capture_default_str();
  command.add_flag("--batch-invariant", translator.model.tuning.batch_invariant,
                   "A line's translation and score do not depend on the other lines decoded beside it: the same "
                   "bytes at any batch size or batching mode (one GEMM algorithm for every batch size, no "
                   "small-batch kernels; slower, see the README)");
  command.add_option("--threads", translator.cpu_threads, "CPU threads, the calling one included (0 = all cores)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();

  // Defaults the model file may replace: --help runs before a model is loaded, so it names both.
  options.beam_size_option =
      command.add_option("-b,--beam-size", search.beam_size, "Beam size (1 = greedy)")
          ->check(CLI::Range(1, 256))
          ->default_str(fmt::format("the model file's num_beams, else {}", search.beam_size));
  command.add_option("--n-best", search.num_hypotheses,
                     "Translations per input line: at most the beam size; with sampling, N independent samples")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command.add_option("--beam-groups", search.beam_groups,
                     "Diverse beam search: split the beam into G groups (G divides the beam size; Hugging Face "
                     "4.x num_beam_groups)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command.add_option("--diversity-penalty", search.diversity_penalty,
                     "Diverse beam search: subtract X from a token's score for each beam of an earlier group that "
                     "took it at this step (Hugging Face's diversity_penalty; needs --beam-groups > 1)")
      ->capture_default_str();
  command.add_option("--length-penalty", search.length_penalty,
                     "Beam score = log-prob / length^penalty (Hugging Face's length_penalty)")
      ->capture_default_str();
  options.max_length_option =
      command
          .add_option("--max-length", options.text.max_length,
                      "Output token limit A [B]: at most A + B * source_length tokens, EOS included "
                      "(Hugging Face's max_new_tokens=N is --max-length N 0)")
          ->expected(1, 2)
          ->default_str(fmt::format("the model file's max_length - 1 (HF counts the decoder start token), else {} {}",
                                    options.text.max_length[0], options.text.max_length[1]));
  command.add_option("--force-eos", options.text.force_eos,
                     "The last allowed token is EOS: auto = as the model file's forced_eos_token_id (off "
                     "without one), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  command.add_option("--max-input-length", translator.max_input_length,
                     "Source tokens per line; longer lines are truncated with a warning")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  command.add_option("--batching", options.text.batching,
                     "iteration: sentences join the running decode at any step, as others finish; shrinking: "
                     "batch after batch, each shrinking as its sentences finish")
      ->check(CLI::IsMember({"iteration", "shrinking"}))
      ->capture_default_str();
  options.max_batch_tokens_option =
      command.add_option("--max-batch-tokens", translator.batching.max_batch_tokens,
                         "Source tokens in flight: their sum (iteration) or sentences x longest (shrinking)")
          ->check(CLI::Range(size_t{1}, size_t{1} << 30))
          ->default_str(fmt::format("{} on a GPU, {} on the CPU", kGpuMaxBatchTokens, kCpuMaxBatchTokens));
  options.max_batch_size_option =
      command.add_option("--max-batch-size", translator.batching.max_batch_size,
                         "Sentences in flight (iteration) or per batch (shrinking); each takes beam-size decoder rows")
          ->check(CLI::Range(size_t{1}, size_t{1} << 20))
          ->default_str(fmt::format("{} on a GPU, {} on the CPU", kGpuMaxBatchSize, kCpuMaxBatchSize));
  command.add_option("--max-gpu-memory", options.max_gpu_memory_mib,
                     "GPU memory the engine's tensors may take on each device, in MiB (0 = what the device has): "
                     "the batch budget is fitted to it, and a run that reaches it halves its sentences in flight")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30))
      ->capture_default_str();
  command.add_option("--min-join", translator.min_join,
                     "iteration: waiting sentences join once this many fit (or all that wait), so that each "
                     "encoder pass takes a group (0 = half of --max-batch-size)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20))
      ->capture_default_str();
  command.add_option("--read-ahead", translator.batching.read_ahead, "Lines read and sorted by length together")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  command.add_option("--repetition-penalty", search.repetition_penalty,
                     "Divide (if positive) or multiply (if negative) the logits of tokens already generated by X "
                     "(Hugging Face's repetition_penalty; log-probs in beam search, as HF; 1 = off)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--no-repeat-ngram-size", search.no_repeat_ngram_size,
                     "Never repeat an n-gram of N tokens (Hugging Face's no_repeat_ngram_size; 0 = off)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  // Sampling: Hugging Face's warpers, applied in HF's order (temperature, top-k, top-p, min-p).
  options.sampling_topk_option =
      command
          .add_option("--sampling-topk", search.sampling_topk,
                      "Sample from the K most likely tokens (0 = all; 1 = no sampling). Any sampling flag implies "
                      "--beam-size 1 unless -b is given")
          ->check(CLI::Range(0, 1 << 24))
          ->default_str("1, or 0 when --sampling-topp or --sampling-minp is given");
  options.sampling_topp_option =
      command.add_option("--sampling-topp", search.sampling_topp, "Sample from the smallest set with probability >= P")
          ->check(CLI::Range(0.0f, 1.0f))
          ->capture_default_str();
  options.sampling_minp_option =
      command
          .add_option("--sampling-minp", search.sampling_minp,
                      "Sample only from tokens at least P times as likely as the most likely one (0 = off)")
          ->check(CLI::Range(0.0f, 1.0f))
          ->capture_default_str();
  command.add_option("--temperature", search.temperature, "Sampling temperature")->capture_default_str();
  command.add_option("--seed", search.seed,
                     "Random seed for sampling: a line draws the same tokens whatever the batch, batching mode or "
                     "device")
      ->capture_default_str();
  command.add_flag("-q,--quiet", options.quiet, "No progress bar, notes or summary (errors still print)");
  const std::map<std::string, LogLevel> levels = {
      {"error", LogLevel::Error}, {"warning", LogLevel::Warning}, {"info", LogLevel::Info}};
  command.add_option("--log-level", options.log_level, "error, warning or info")
      ->transform(CLI::CheckedTransformer(levels, CLI::ignore_case))
      ->default_str("warning");
}

void log(const CommonOptions& options, LogLevel level, const std::string& message) {
  if (options.quiet && level != LogLevel::Error) return;
  if (static_cast<int>(level) > static_cast<int>(options.log_level)) return;
  std::cerr << "seqtrans: " << message << '\n';
}

void note_setup_choices(const CommonOptions& options) {
  if (options.devices.cpu_fallback)
    log(options, LogLevel::Warning,
        cuda_compiled() ? "no GPU found, translating on the CPU" : "built without CUDA, translating on the CPU");
  if (options.translator.cpu_threads > 0 && !ops::cpu_threads_settable())
    log(options, LogLevel::Warning, "--threads is ignored: the BLAS library of this build has no thread setting");
}

namespace {

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

}  // namespace

void resolve_common_options(CommonOptions& options) {
  options.text.beam_size_given = given(options.beam_size_option);
  options.text.max_length_given = given(options.max_length_option);
  if (options.max_new_tokens > 0) {
    SEQTRANS_CHECK(!options.text.max_length_given, "give --max-new-tokens or --max-length, not both");
    options.text.max_length = {static_cast<float>(options.max_new_tokens), 0.0f};
    options.text.max_length_given = true;
  }
  options.text.max_batch_size_given = given(options.max_batch_size_option);
  options.text.max_batch_tokens_given = given(options.max_batch_tokens_option);
  options.text.sampling_topk_given = given(options.sampling_topk_option);
  options.text.sampling_topp_given = given(options.sampling_topp_option);
  options.text.sampling_minp_given = given(options.sampling_minp_option);
  options.translator.max_gpu_memory = options.max_gpu_memory_mib << 20;
  if (!options.languages.source.empty() || !options.languages.target.empty())
    options.translator.languages = {options.languages};
  options.devices = resolve_settings(options.text, options.translator);
}

}  // namespace seqtrans::app
