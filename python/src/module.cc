// seqtrans._seqtrans: the Python binding (nanobind). Argument conversion and results happen here, with
// the GIL; the engines run in PythonTranslator without it, so other Python threads go on meanwhile.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "core/error.h"
#include "python_translator.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqtrans::python {
namespace {

// max_length as Python takes it: A, or (A, B) for A + B x source length.
using MaxLength = std::variant<int, std::vector<float>>;

// One call's search keyword arguments, as translate_batch and translate_file take them.
struct CallKeywords {
  std::optional<int> beam_size;
  int n_best;
  float length_penalty;
  std::optional<MaxLength> max_length;
  std::optional<bool> force_eos;
  std::optional<int> sampling_topk;
  std::optional<float> sampling_topp;
  std::optional<float> sampling_minp;
  float temperature;
  uint64_t seed;
  float repetition_penalty;
  int no_repeat_ngram_size;
  int beam_groups;
  float diversity_penalty;
};

CallArgs call_args(const CallKeywords& keywords) {
  CallArgs call;
  call.beam_size = keywords.beam_size;
  call.n_best = keywords.n_best;
  call.length_penalty = keywords.length_penalty;
  if (keywords.max_length) {
    if (const int* a = std::get_if<int>(&*keywords.max_length))
      call.max_length = std::vector<float>{static_cast<float>(*a)};
    else
      call.max_length = std::get<std::vector<float>>(*keywords.max_length);
  }
  call.force_eos = keywords.force_eos;
  call.sampling_topk = keywords.sampling_topk;
  call.sampling_topp = keywords.sampling_topp;
  call.sampling_minp = keywords.sampling_minp;
  call.temperature = keywords.temperature;
  call.seed = keywords.seed;
  call.repetition_penalty = keywords.repetition_penalty;
  call.no_repeat_ngram_size = keywords.no_repeat_ngram_size;
  call.beam_groups = keywords.beam_groups;
  call.diversity_penalty = keywords.diversity_penalty;
  return call;
}

// A language argument: one code for every line, or a list with one per line.
using LanguageArgument = std::variant<std::string, std::vector<std::string>>;

// The call's languages as the engine takes them: none, one pair, or one per line (a single code is repeated).
std::vector<Languages> languages_of(const std::optional<LanguageArgument>& source,
                                    const std::optional<LanguageArgument>& target) {
  if (!source && !target) return {};
  const auto codes = [](const std::optional<LanguageArgument>& argument) {
    if (!argument) return std::vector<std::string>{""};
    if (const std::string* code = std::get_if<std::string>(&*argument)) return std::vector<std::string>{*code};
    return std::get<std::vector<std::string>>(*argument);
  };
  const std::vector<std::string> sources = codes(source), targets = codes(target);
  const size_t lines = std::max(sources.size(), targets.size());
  if (sources.size() != 1 && targets.size() != 1 && sources.size() != targets.size())
    throw seqtrans::Error(fmt::format("source_lang has {} codes and target_lang {}: give one code or one per line",
                                      sources.size(), targets.size()));
  std::vector<Languages> languages;
  for (size_t i = 0; i < lines; ++i)
    languages.push_back({sources[sources.size() == 1 ? 0 : i], targets[targets.size() == 1 ? 0 : i]});
  return languages;
}

// Raises the engine's warnings as Python UserWarnings, now that the GIL is held again.
void raise_warnings(const std::vector<std::string>& warnings) {
  for (const std::string& message : warnings)
    if (PyErr_WarnEx(PyExc_UserWarning, ("seqtrans: " + message).c_str(), 2) != 0) throw nb::python_error();
}

// The bundled model, or $SEQTRANS_MODEL: the package's Python side knows where it is installed.
std::string default_model_path() {
  return nb::cast<std::string>(nb::module_::import_("seqtrans").attr("default_model_path")());
}

std::string describe_result(const Result& result) {
  const Hypothesis& best = result.hypotheses.front();
  std::string text = nb::cast<std::string>(nb::repr(nb::cast(best.text)));
  if (best.score) text += ", score=" + nb::cast<std::string>(nb::repr(nb::cast(*best.score)));
  if (result.hypotheses.size() > 1) text += ", n_best=" + std::to_string(result.hypotheses.size());
  return "TranslationResult(" + text + ")";
}

const char* const kCallDoc = R"(
beam_size: 1 = greedy search; None = the model file's num_beams, else 4 (the CLI's --beam-size); 1 when a
    sampling setting is given.
n_best: hypotheses per line, at most the beam size (with sampling: independent samples per line).
with_scores: fill each hypothesis's score (length-normalized log-probability for beam search, summed
    log-probability for greedy search and sampling); None otherwise.
length_penalty: beam score = log-prob / length ** length_penalty.
max_length: A, or (A, B): at most A + B x source length tokens, EOS included; None = the model file's
    max_length - 1, else 256.
force_eos: the last allowed token is EOS (True/False); None = as the model file says.
sampling_topk, sampling_topp, sampling_minp, temperature, seed: random sampling, Hugging Face's warpers in
    its order (the CLI's --sampling-topk, --sampling-topp, --sampling-minp, --temperature, --seed);
    sampling_topk None = 1, or 0 when sampling_topp or sampling_minp is given. Reproducible for a seed.
repetition_penalty, no_repeat_ngram_size: Hugging Face's repetition controls (1.0 and 0 = off).
beam_groups, diversity_penalty: diverse beam search (beam_groups must divide the beam size).)";

}  // namespace
}  // namespace seqtrans::python

NB_MODULE(_seqtrans, m) {
  using namespace seqtrans::python;
  m.doc() = "seqtrans: fast neural machine translation (the compiled engine; use the seqtrans package)";
  m.attr("__version__") = SEQTRANS_VERSION;
  nb::exception<seqtrans::Error>(m, "Error", PyExc_RuntimeError);

  nb::class_<Hypothesis>(m, "Hypothesis", "One translation of a line, with its score when asked for.")
      .def_ro("text", &Hypothesis::text)
      .def_ro("score", &Hypothesis::score)
      .def_ro("tokens", &Hypothesis::tokens, "Tokens generated, EOS excluded.")
      .def("__repr__", [](const Hypothesis& hypothesis) {
        std::string text = "Hypothesis(" + nb::cast<std::string>(nb::repr(nb::cast(hypothesis.text)));
        if (hypothesis.score) text += ", score=" + nb::cast<std::string>(nb::repr(nb::cast(*hypothesis.score)));
        return text + ")";
      });

  nb::class_<Result>(m, "TranslationResult", "A line's translation: its n-best hypotheses, best first.")
      .def_ro("hypotheses", &Result::hypotheses)
      .def_prop_ro("text", [](const Result& result) { return result.hypotheses.front().text; }, "The best translation.")
      .def_prop_ro("score", [](const Result& result) { return result.hypotheses.front().score; },
                   "The best translation's score (with_scores=True), else None.")
      .def("__repr__", &describe_result);

  nb::class_<PythonTranslator>(m, "Translator",
                               "A loaded model on one or more devices. Calls from several threads are safe: they "
                               "run one at a time, each with its own settings, and the GIL is released meanwhile.")
      .def(
          "__init__",
          [](PythonTranslator* self, const std::optional<std::filesystem::path>& model_path, const std::string& device,
             const std::string& precision, int threads, const std::string& batching,
             std::optional<size_t> max_batch_size, std::optional<size_t> max_batch_tokens, size_t min_join,
             size_t read_ahead, size_t max_input_length, size_t max_gpu_memory, bool batch_invariant) {
            EngineArgs args;
            args.model_path = model_path ? model_path->string() : default_model_path();
            args.device = device;
            args.precision = precision;
            args.threads = threads;
            args.batching = batching;
            args.max_batch_size = max_batch_size;
            args.max_batch_tokens = max_batch_tokens;
            args.min_join = min_join;
            args.read_ahead = read_ahead;
            args.max_input_length = max_input_length;
            args.max_gpu_memory_mib = max_gpu_memory;
            args.batch_invariant = batch_invariant;
            nb::gil_scoped_release release;
            new (self) PythonTranslator(args);
          },
          "model_path"_a = nb::none(), "device"_a = "auto", "precision"_a = "auto", "threads"_a = 0,
          "batching"_a = "iteration", "max_batch_size"_a = nb::none(),
          "max_batch_tokens"_a = nb::none(), "min_join"_a = EngineArgs().min_join,
          "read_ahead"_a = EngineArgs().read_ahead, "max_input_length"_a = EngineArgs().max_input_length,
          "max_gpu_memory"_a = 0, "batch_invariant"_a = false,
          R"(Loads a model file (None: $SEQTRANS_MODEL, else the bundled English-German model).

device: "auto" (a GPU when there is one, else the CPU), "cpu", "cuda", "cuda:N", or several GPUs:
    "cuda:all" or "cuda:0,1" (one engine per GPU, lines dealt to whichever is free, results in order).
precision: "auto" (fp16 on a GPU, fp32 on the CPU), "fp16", "fp32" or "int8" (the CPU: int8 weights and products).
threads: CPU threads for matrix products (0 = all cores).
batching, max_batch_size, max_batch_tokens, min_join, read_ahead, max_input_length, max_gpu_memory: as
    the CLI's --batching, --max-batch-size, --max-batch-tokens, --min-join, --read-ahead, --max-input-length,
    --max-gpu-memory (MiB)
    (budgets left None take the device's defaults: 256 sentences and 16384 tokens on a GPU, 64 and
    4096 on the CPU).
batch_invariant: as --batch-invariant: a line's result does not depend on the other lines decoded
    beside it (slower).)")
      .def(
          "translate_batch",
          [](PythonTranslator& self, const std::vector<std::string>& lines, std::optional<int> beam_size, int n_best,
             bool with_scores, float length_penalty, const std::optional<MaxLength>& max_length,
             std::optional<bool> force_eos, std::optional<int> sampling_topk, std::optional<float> sampling_topp,
             std::optional<float> sampling_minp, float temperature, uint64_t seed, float repetition_penalty,
             int no_repeat_ngram_size, int beam_groups, float diversity_penalty,
             const std::optional<std::vector<std::string>>& target_prefix,
             const std::optional<LanguageArgument>& source_lang, const std::optional<LanguageArgument>& target_lang) {
            const CallArgs call = call_args({beam_size, n_best, length_penalty, max_length, force_eos, sampling_topk,
                                             sampling_topp, sampling_minp, temperature, seed, repetition_penalty,
                                             no_repeat_ngram_size, beam_groups, diversity_penalty});
            std::vector<std::string> warnings;
            std::vector<Result> results;
            {
              nb::gil_scoped_release release;
              const LineSettings line_settings{target_prefix.value_or(std::vector<std::string>{}),
                                               languages_of(source_lang, target_lang)};
              results = self.translate_batch(lines, call, with_scores, line_settings, warnings);
            }
            raise_warnings(warnings);
            return results;
          },
          "lines"_a, nb::kw_only(), "beam_size"_a = nb::none(), "n_best"_a = CallArgs().n_best,
          "with_scores"_a = false, "length_penalty"_a = CallArgs().length_penalty, "max_length"_a = nb::none(),
          "force_eos"_a = nb::none(), "sampling_topk"_a = nb::none(), "sampling_topp"_a = nb::none(),
          "sampling_minp"_a = nb::none(), "temperature"_a = CallArgs().temperature, "seed"_a = CallArgs().seed,
          "repetition_penalty"_a = CallArgs().repetition_penalty,
          "no_repeat_ngram_size"_a = CallArgs().no_repeat_ngram_size, "beam_groups"_a = CallArgs().beam_groups,
          "diversity_penalty"_a = CallArgs().diversity_penalty, "target_prefix"_a = nb::none(),
          "source_lang"_a = nb::none(), "target_lang"_a = nb::none(),
          (std::string("Translates a list of lines; result i belongs to lines[i]. A blank line gives \"\".\n") +
           kCallDoc +
           "\ntarget_prefix: None, or one string per line (\"\" for none): each translation starts with its "
           "line's prefix,\n    which is part of the text and adds 0 to the score (the CLI's --target-prefix).\n"
           "source_lang, target_lang: multilingual models (NLLB-200, M2M-100, mBART-50): a language code "
           "(\"eng_Latn\", \"en\",\n    \"en_XX\") for every line, or a list with one per line.")
              .c_str())
      .def(
          "translate_file",
          [](PythonTranslator& self, const std::filesystem::path& input_path, const std::filesystem::path& output_path,
             std::optional<int> beam_size, int n_best, bool with_scores, float length_penalty,
             const std::optional<MaxLength>& max_length, std::optional<bool> force_eos,
             std::optional<int> sampling_topk, std::optional<float> sampling_topp, std::optional<float> sampling_minp,
             float temperature, uint64_t seed, float repetition_penalty, int no_repeat_ngram_size, int beam_groups,
             float diversity_penalty, const std::optional<std::string>& source_lang,
             const std::optional<std::string>& target_lang) {
            const CallArgs call = call_args({beam_size, n_best, length_penalty, max_length, force_eos, sampling_topk,
                                             sampling_topp, sampling_minp, temperature, seed, repetition_penalty,
                                             no_repeat_ngram_size, beam_groups, diversity_penalty});
            std::vector<std::string> warnings;
            size_t lines = 0;
            {
              nb::gil_scoped_release release;
              const std::vector<seqtrans::Languages> languages =
                  source_lang || target_lang
                      ? std::vector<seqtrans::Languages>{{source_lang.value_or(""), target_lang.value_or("")}}
                      : std::vector<seqtrans::Languages>{};
              lines = self.translate_file(input_path.string(), output_path.string(), call, with_scores, languages,
                                          warnings);
            }
            raise_warnings(warnings);
            return lines;
          },
          "input_path"_a, "output_path"_a, nb::kw_only(), "beam_size"_a = nb::none(), "n_best"_a = CallArgs().n_best,
          "with_scores"_a = false, "length_penalty"_a = CallArgs().length_penalty, "max_length"_a = nb::none(),
          "force_eos"_a = nb::none(), "sampling_topk"_a = nb::none(), "sampling_topp"_a = nb::none(),
          "sampling_minp"_a = nb::none(), "temperature"_a = CallArgs().temperature, "seed"_a = CallArgs().seed,
          "repetition_penalty"_a = CallArgs().repetition_penalty,
          "no_repeat_ngram_size"_a = CallArgs().no_repeat_ngram_size, "beam_groups"_a = CallArgs().beam_groups,
          "diversity_penalty"_a = CallArgs().diversity_penalty, "source_lang"_a = nb::none(),
          "target_lang"_a = nb::none(),
          (std::string("Translates a file as `seqtrans translate -i input_path -o output_path` does: one line per "
                       "input line (n-best: \"index ||| text ||| score\"; with_scores: \"score ||| text\"), the "
                       "output replaced only when complete. Returns the number of lines.\n") +
           kCallDoc)
              .c_str())
      .def_prop_ro("device", &PythonTranslator::device, "The devices in use: \"cpu\", \"cuda:0\", \"cuda:0,1\", ...")
      .def_prop_ro("engines", &PythonTranslator::engines, "Engines loaded: one per device.")
      .def_prop_ro("model_path", &PythonTranslator::model_path)
      .def_prop_ro("model_kind", &PythonTranslator::model_kind,
                   "\"encoder-decoder\" (translation models) or \"decoder-only\" (generation models).");
}
