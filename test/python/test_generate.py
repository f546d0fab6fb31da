"""Decoder-only generation: seqtrans.Generator and `seqtrans generate` on a tiny Llama checkpoint of test/data
(its Hugging Face parity is test/e2e/llama_parity_test.cc). The two front ends must give the same completions;
the CLI's escapes, --jsonl, --stop and translate's --prompt-template must frame them as documented."""

import json
import os
import subprocess

import pytest

import seqtrans
from conftest import REPOSITORY, golden_sources

TEMPLATE = "English: {source}\nGerman:"
SOURCES = golden_sources(8)
PROMPTS = [TEMPLATE.replace("{source}", source) for source in SOURCES]


def run_cli(cli, model, *arguments, stdin=""):
    return subprocess.run([cli, *arguments, "-m", str(model), "--device", "cpu", "-q"], input=stdin.encode(),
                          capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def generator(llama_model):
    return seqtrans.Generator(str(llama_model), device="cpu")


def test_escaped_lines_give_the_generator_completions(cli, llama_model, generator):
    expected = [g.text for g in generator.generate_batch(PROMPTS, max_new_tokens=24, beam_size=1)]
    stdin = "".join(prompt.replace("\\", "\\\\").replace("\n", "\\n") + "\n" for prompt in PROMPTS)
    result = run_cli(cli, llama_model, "generate", "--max-new-tokens", "24", "-b", "1", stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [text.replace("\\", "\\\\").replace("\n", "\\n") for text in expected]


def test_jsonl_gives_text_and_token_counts(cli, llama_model, generator):
    expected = generator.generate_batch(PROMPTS, max_new_tokens=24, beam_size=2)
    stdin = "".join(json.dumps({"prompt": prompt, "id": i}) + "\n" for i, prompt in enumerate(PROMPTS))
    result = run_cli(cli, llama_model, "generate", "--jsonl", "--max-new-tokens", "24", "-b", "2", stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    objects = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [(o["text"], o["tokens"]) for o in objects] == [(g.text, g.tokens) for g in expected]
    assert all(0 < o["tokens"] <= 24 for o in objects)


def test_stop_strings_cut_the_completion(cli, llama_model, generator):
    full = [g.text for g in generator.generate_batch(PROMPTS, max_new_tokens=24)]
    cut = [g.text for g in generator.generate_batch(PROMPTS, max_new_tokens=24, stop=[" ", "."])]
    assert cut == [text.split(" ")[0].split(".")[0] for text in full]
    result = run_cli(cli, llama_model, "generate", "--max-new-tokens", "24", "--stop", " ", "--stop", ".",
                     stdin="".join(p.replace("\n", "\\n") + "\n" for p in PROMPTS))
    assert result.stdout.decode().splitlines() == cut


def test_prompt_template_translates_lines(cli, llama_model, generator, tmp_path):
    template = tmp_path / "template.txt"
    template.write_text(TEMPLATE + "\n")
    result = run_cli(cli, llama_model, "translate", "--prompt-template", str(template), "-b", "4", "--max-length",
                     "24", "0",
                     stdin="".join(source + "\n" for source in SOURCES))
    assert result.returncode == 0, result.stderr.decode()
    expected = generator.generate_batch(PROMPTS, max_new_tokens=24, beam_size=4, stop=["\n"])
    assert result.stdout.decode().splitlines() == [g.text for g in expected]


def test_models_of_the_other_kind_are_refused(cli):
    with pytest.raises(ValueError, match="encoder-decoder"):
        seqtrans.Generator(seqtrans.bundled_model_path())
    result = subprocess.run([cli, "generate", "-m", seqtrans.bundled_model_path(), "-q"], input=b"Hello\n",
                            capture_output=True, timeout=60)
    assert result.returncode == 1
    assert len(result.stderr.decode().splitlines()) == 1 and "seqtrans translate" in result.stderr.decode()


def test_bad_json_is_one_line_error(cli, llama_model):
    result = run_cli(cli, llama_model, "generate", "--jsonl", stdin='{"prompt": "a"}\n{"prompt": 3\n')
    assert result.returncode == 1
    assert "input line 2" in result.stderr.decode() and len(result.stderr.decode().splitlines()) == 1


def test_n_best_lists_every_hypothesis(cli, llama_model):
    result = run_cli(cli, llama_model, "generate", "--jsonl", "-b", "4", "--n-best", "3", "--max-new-tokens", "16",
                     stdin="".join(json.dumps({"prompt": prompt}) + "\n" for prompt in PROMPTS[:3]))
    assert result.returncode == 0, result.stderr.decode()
    for line in result.stdout.decode().splitlines():
        completion = json.loads(line)
        assert len(completion["n_best"]) == 3
        assert completion["n_best"][0] == {"text": completion["text"], "tokens": completion["tokens"]}
    plain = run_cli(cli, llama_model, "generate", "-b", "4", "--n-best", "3", "--max-new-tokens", "16",
                    stdin="".join(p.replace("\n", "\\n") + "\n" for p in PROMPTS[:3]))
    indices = [line.split(" ||| ")[0] for line in plain.stdout.decode().splitlines()]
    assert indices == ["0", "0", "0", "1", "1", "1", "2", "2", "2"]


def test_a_prompt_near_the_model_positions_stops_there(cli, llama_model):
    # The tiny model has 256 positions: a prompt of most of them leaves room for a few tokens, not 256.
    long_prompt = "English: " + " ".join(["A dog runs on the grass."] * 36) + "\nGerman:"
    result = run_cli(cli, llama_model, "generate", "--jsonl", "--max-length", "256", "0",
                     stdin=json.dumps({"prompt": long_prompt}) + "\n")
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout.decode())["tokens"] < 256


def test_the_bundled_decoder_only_demo_works_out_of_the_box(cli):
    # No -m: generate (and translate with a prompt template) take models/llama-demo-en-de.seqtrans.
    environment = {key: value for key, value in os.environ.items() if key != "SEQTRANS_MODEL"}
    prompts = "English: A dog runs on the beach.\\nGerman:\nEnglish: Two children play football.\\nGerman:\n"
    generated = subprocess.run([cli, "generate", "--device", "cpu", "-q", "--stop", "\\n"], input=prompts.encode(),
                               capture_output=True, timeout=120, env=environment)
    assert generated.returncode == 0, generated.stderr.decode()
    lines = generated.stdout.decode().splitlines()
    assert len(lines) == 2 and all(line.startswith(("Ein", "Zwei")) for line in lines)
    template = REPOSITORY / "models" / "llama-demo-en-de.prompt.txt"
    translated = subprocess.run([cli, "translate", "--device", "cpu", "-q", "--prompt-template", str(template)],
                                input=b"A dog runs on the beach.\nTwo children play football.\n", capture_output=True,
                                timeout=120, env=environment)
    assert translated.returncode == 0, translated.stderr.decode()
    assert translated.stdout.decode().splitlines() == lines
