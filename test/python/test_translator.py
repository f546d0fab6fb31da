"""The Python package against the CLI: the same text for the same options, results kept apart across
threads, errors as exceptions with the CLI's one-line messages. CPU, bundled model."""

import hashlib
import os
import pathlib
import subprocess
import threading
import time
import warnings

import pytest

import seqtrans
from conftest import BUNDLED_MODEL, REPOSITORY, golden_sources

# The golden inputs (1 to 66 words here), a blank line, and lines the reader must keep whole.
INPUT = golden_sources(20) + ["", "Two dogs are playing in the snow.", "tab\there, a NUL \x00 and é"]

# (CLI flags, translate_batch / translate_file keyword arguments): the same settings both ways.
SETTINGS = [
    ([], {}),
    (["-b", "1", "--with-scores"], {"beam_size": 1, "with_scores": True}),
    (["-b", "3", "--n-best", "2", "--length-penalty", "0.6"], {"beam_size": 3, "n_best": 2, "length_penalty": 0.6}),
    (["-b", "1", "--sampling-topk", "10", "--temperature", "0.8", "--seed", "7", "--with-scores"],
     {"beam_size": 1, "sampling_topk": 10, "temperature": 0.8, "seed": 7, "with_scores": True}),
    (["-b", "2", "--max-length", "6", "0.25", "--force-eos", "on"], {"beam_size": 2, "max_length": (6, 0.25), "force_eos": True}),
    # Top-p and min-p alone: the whole vocabulary, beam size 1 (as the CLI decides when -b is not given).
    (["--sampling-topp", "0.9", "--sampling-minp", "0.05", "--seed", "3", "--with-scores"],
     {"sampling_topp": 0.9, "sampling_minp": 0.05, "seed": 3, "with_scores": True}),
    (["-b", "4", "--repetition-penalty", "1.3", "--no-repeat-ngram-size", "2"],
     {"beam_size": 4, "repetition_penalty": 1.3, "no_repeat_ngram_size": 2}),
    (["-b", "4", "--beam-groups", "2", "--diversity-penalty", "0.5", "--n-best", "2"],
     {"beam_size": 4, "beam_groups": 2, "diversity_penalty": 0.5, "n_best": 2}),
]
SETTING_IDS = ["default", "greedy-scores", "nbest", "sampling", "limit", "nucleus", "repetition", "diverse"]


def run_cli(cli, arguments, stdin=None):
    return subprocess.run([cli, *arguments], input=stdin, capture_output=True, timeout=300)


def cli_translate(cli, input_path, flags):
    result = run_cli(cli, ["translate", "-m", str(BUNDLED_MODEL), "--device", "cpu", "-q", "-i", str(input_path), *flags])
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def cli_error(cli, arguments):
    """The CLI's one error line, without its "seqtrans: error: " prefix."""
    result = run_cli(cli, arguments, stdin=b"Hello.\n")
    assert result.returncode != 0
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seqtrans: error: "), lines
    return lines[0][len("seqtrans: error: "):]


def formatted(results, kwargs):
    """translate_batch results written as the CLI writes them."""
    out = []
    for index, result in enumerate(results):
        if kwargs.get("n_best", 1) > 1:
            out += [f"{index} ||| {h.text}" for h in result.hypotheses]  # scores: with_scores only
        elif kwargs.get("with_scores"):
            out.append(f"{result.score:.4f} ||| {result.text}")
        else:
            out.append(result.text)
    return out


def without_scores(cli_lines):
    """n-best lines "index ||| text ||| score" without the score."""
    return [line.rsplit(" ||| ", 1)[0] for line in cli_lines]


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "input.en"
    path.write_text("".join(line + "\n" for line in INPUT), encoding="utf-8")
    return path


def test_version_is_the_projects():
    cmake = (REPOSITORY / "CMakeLists.txt").read_text()
    assert f"project(seqtrans VERSION {seqtrans.__version__} " in cmake


def test_the_bundled_model_ships_in_the_package(translator):
    shipped = pathlib.Path(seqtrans.bundled_model_path())
    assert shipped.parent.parent == pathlib.Path(seqtrans.__file__).parent
    assert hashlib.sha256(shipped.read_bytes()).digest() == hashlib.sha256(BUNDLED_MODEL.read_bytes()).digest()
    assert translator.model_path == str(shipped)
    assert translator.device == "cpu" and translator.engines == 1


def test_type_stubs_ship_with_the_package():
    package = pathlib.Path(seqtrans.__file__).parent
    stub = (package / "_seqtrans.pyi").read_text()
    assert (package / "py.typed").exists()
    for name in ("class Translator", "def translate_batch", "def translate_file", "class TranslationResult"):
        assert name in stub


@pytest.mark.parametrize("flags, kwargs", SETTINGS, ids=SETTING_IDS)
def test_translate_batch_gives_the_cli_text(cli, input_file, translator, flags, kwargs):
    cli_lines = cli_translate(cli, input_file, flags).splitlines()
    results = translator.translate_batch(INPUT, **kwargs)
    assert len(results) == len(INPUT)
    python_lines = formatted(results, kwargs)
    if kwargs.get("n_best", 1) > 1:
        cli_lines = without_scores(cli_lines)
    assert python_lines == cli_lines
    assert results[INPUT.index("")].text == ""
    assert all(len(r.hypotheses) == kwargs.get("n_best", 1) for r in results)
    assert all((h.score is not None) == kwargs.get("with_scores", False) for r in results for h in r.hypotheses)


@pytest.mark.parametrize("flags, kwargs", SETTINGS, ids=SETTING_IDS)
def test_translate_file_writes_what_the_cli_writes(cli, input_file, translator, tmp_path, flags, kwargs):
    output = tmp_path / "out.de"
    if kwargs.get("n_best", 1) > 1:
        kwargs = dict(kwargs, with_scores=True)  # n-best lines carry their scores either way
    assert translator.translate_file(input_file, output, **kwargs) == len(INPUT)
    assert output.read_text(encoding="utf-8") == cli_translate(cli, input_file, flags)


def test_target_prefixes_give_the_cli_text(cli, input_file, translator, tmp_path):
    prefixes = ["Ein" if i % 3 == 0 else "" for i in range(len(INPUT))]
    prefix_file = tmp_path / "prefixes.de"
    prefix_file.write_text("".join(p + "\n" for p in prefixes), encoding="utf-8")
    flags = ["-b", "2", "--with-scores", "--target-prefix", str(prefix_file)]
    cli_lines = cli_translate(cli, input_file, flags).splitlines()
    results = translator.translate_batch(INPUT, beam_size=2, with_scores=True, target_prefix=prefixes)
    assert formatted(results, {"with_scores": True}) == cli_lines
    assert results[0].text.startswith("Ein")
    # The next call without prefixes is unprefixed again.
    assert translator.translate_batch(INPUT[:1], beam_size=2)[0].text == cli_translate(cli, input_file, ["-b", "2"]).splitlines()[0]
    with pytest.raises(seqtrans.Error, match="2 prefixes for 1 lines"):
        translator.translate_batch(["Hello."], target_prefix=["a", "b"])


def test_four_threads_each_get_their_own_results(translator):
    # Each thread its own lines and settings (greedy and beam alternate, so calls also switch settings).
    sources = golden_sources(48)
    jobs = [(sources[k::4], {"beam_size": 1 if k % 2 else 3}) for k in range(4)]
    expected = [[r.text for r in translator.translate_batch(lines, **kwargs)] for lines, kwargs in jobs]
    got = [[] for _ in jobs]
    start = threading.Barrier(len(jobs))

    def work(k):
        lines, kwargs = jobs[k]
        start.wait()
        for _ in range(2):
            got[k].append([r.text for r in translator.translate_batch(lines, **kwargs)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    for k in range(len(jobs)):
        assert got[k] == [expected[k], expected[k]], f"thread {k}"
    assert len({tuple(e) for e in expected}) == len(jobs)  # the threads' results differ from each other


def test_the_gil_is_released_while_translating(translator):
    lines = golden_sources(16)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (translator.translate_batch(lines, beam_size=3), done.set()))
    worker.start()
    ticks = 0
    while not done.is_set():  # Python code on this thread runs while the engine works
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert ticks > 20


@pytest.mark.parametrize("cli_arguments, call", [
    (["translate", "-m", "/nonexistent/model.seqtrans"], lambda: seqtrans.Translator("/nonexistent/model.seqtrans")),
    (["translate", "-m", str(REPOSITORY / "README.md")], lambda: seqtrans.Translator(REPOSITORY / "README.md")),
    (["translate", "--device", "tpu"], lambda: seqtrans.Translator(device="tpu")),
    (["translate", "--device", "cuda:0,0"], lambda: seqtrans.Translator(device="cuda:0,0")),
    (["translate", "--device", "cpu", "--precision", "fp16"], lambda: seqtrans.Translator(device="cpu", precision="fp16")),
    (["translate", "--device", "cpu", "-b", "2", "--n-best", "3"],
     lambda: seqtrans.Translator(device="cpu").translate_batch(["Hi."], beam_size=2, n_best=3)),
    (["translate", "--device", "cpu", "--max-length", "2.5"],
     lambda: seqtrans.Translator(device="cpu").translate_batch(["Hi."], max_length=(2.5,))),
    (["translate", "--device", "cpu", "-b", "4", "--sampling-topk", "5"],
     lambda: seqtrans.Translator(device="cpu").translate_batch(["Hi."], beam_size=4, sampling_topk=5)),
    (["translate", "--device", "cpu", "--source-lang", "en", "--target-lang", "de"],
     lambda: seqtrans.Translator(device="cpu").translate_batch(["Hi."], source_lang="en", target_lang="de")),
], ids=["missing-model", "not-a-model", "bad-device", "device-twice", "fp16-on-cpu", "nbest-over-beam",
        "fractional-limit", "sampling-with-beam", "languages-for-one-pair"])
def test_errors_are_exceptions_with_the_cli_message(cli, cli_arguments, call):
    with pytest.raises(seqtrans.Error) as raised:
        call()
    assert str(raised.value) == cli_error(cli, cli_arguments)
    assert "\n" not in str(raised.value)


def test_file_errors_are_exceptions_with_the_cli_message(cli, translator, tmp_path):
    missing = tmp_path / "missing.en"
    with pytest.raises(seqtrans.Error) as raised:
        translator.translate_file(missing, tmp_path / "out.de")
    # The CLI checks -i before it starts (CLI11's message); the library's own message names the file.
    assert str(missing) in str(raised.value)
    source = tmp_path / "in.en"
    source.write_text("Hello.\n")
    with pytest.raises(seqtrans.Error) as raised:
        translator.translate_file(source, tmp_path)  # a directory
    assert str(raised.value) == cli_error(cli, ["translate", "--device", "cpu", "-i", str(source), "-o", str(tmp_path)])
    # The translator is still usable after errors.
    assert translator.translate_batch(["Hello."])[0].text


def test_truncated_lines_warn_as_the_cli_does(cli, tmp_path):
    short = seqtrans.Translator(device="cpu", max_input_length=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short.translate_batch(["Hello.", "A man is riding a bike along the river bank."], beam_size=1)
    messages = [str(w.message) for w in caught]
    source = tmp_path / "in.en"
    source.write_text("Hello.\nA man is riding a bike along the river bank.\n")
    result = run_cli(cli, ["translate", "--device", "cpu", "-b", "1", "--max-input-length", "5", "-i", str(source)])
    cli_warnings = [l for l in result.stderr.decode().splitlines() if "truncated" in l]
    assert messages == cli_warnings and len(messages) == 1


def test_a_model_from_the_environment_replaces_the_bundled_default(monkeypatch):
    monkeypatch.setenv("SEQTRANS_MODEL", "/nonexistent/from-environment.seqtrans")
    with pytest.raises(seqtrans.Error, match="from-environment"):
        seqtrans.Translator(device="cpu")


@pytest.mark.skipif(os.environ.get("SEQTRANS_GPU_TESTS") != "1", reason="GPU test: set SEQTRANS_GPU_TESTS=1 on a machine with 2+ GPUs")
def test_gpu_all_devices_give_the_single_gpu_text():
    sources = golden_sources(362) * 4
    one = seqtrans.Translator(device="cuda:0", precision="fp32")
    every = seqtrans.Translator(device="cuda:all", precision="fp32")
    assert every.engines >= 2, "needs two GPUs"
    assert [r.text for r in every.translate_batch(sources)] == [r.text for r in one.translate_batch(sources)]


def test_batch_invariant_scores_do_not_depend_on_the_batch():
    """batch_invariant=True: a line's greedy text and score are the same bits alone as among 64 lines."""
    lines = golden_sources(12)
    results = []
    for max_batch_size in (1, 64):
        engine = seqtrans.Translator(device="cpu", batch_invariant=True, max_batch_size=max_batch_size)
        results.append([(r.text, r.score) for r in engine.translate_batch(lines, beam_size=1, with_scores=True)])
    assert results[0] == results[1]
