"""Multilingual models from Python: source_lang / target_lang give the CLI's --source-lang / --target-lang text,
one code for every line or a list with one per line; a bad code is an exception with the CLI's message.
The tiny NLLB-200 checkpoint of test/data, converted here (the converter needs numpy, protobuf, sentencepiece)."""

import subprocess
import sys

import pytest

import seqtrans
from conftest import REPOSITORY, golden_sources

pytest.importorskip("numpy")

LINES = golden_sources(12)


@pytest.fixture(scope="module")
def nllb_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("nllb") / "nllb_tiny.seqtrans"
    subprocess.run([sys.executable, str(REPOSITORY / "scripts" / "convert_hf.py"),
                    str(REPOSITORY / "test" / "data" / "nllb_tiny"), str(out), "--dtype", "fp32"],
                   check=True, capture_output=True)
    return out


def cli_lines(cli, model, lines, source, target):
    result = subprocess.run([cli, "translate", "-m", str(model), "--device", "cpu", "-q", "-b", "1",
                             "--source-lang", source, "--target-lang", target],
                            input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().splitlines()


def test_one_code_for_every_line_gives_the_cli_text(cli, nllb_model):
    translator = seqtrans.Translator(nllb_model, device="cpu")
    results = translator.translate_batch(LINES, beam_size=1, source_lang="eng_Latn", target_lang="deu_Latn")
    assert [r.text for r in results] == cli_lines(cli, nllb_model, LINES, "eng_Latn", "deu_Latn")


def test_a_list_gives_each_line_its_own_target(cli, nllb_model):
    translator = seqtrans.Translator(nllb_model, device="cpu")
    targets = ["deu_Latn" if i % 2 == 0 else "fra_Latn" for i in range(len(LINES))]
    results = translator.translate_batch(LINES, beam_size=1, source_lang="eng_Latn", target_lang=targets)
    german = cli_lines(cli, nllb_model, LINES[0::2], "eng_Latn", "deu_Latn")
    french = cli_lines(cli, nllb_model, LINES[1::2], "eng_Latn", "fra_Latn")
    assert [r.text for r in results[0::2]] == german
    assert [r.text for r in results[1::2]] == french


def test_missing_and_unknown_codes_are_the_cli_errors(cli, nllb_model):
    translator = seqtrans.Translator(nllb_model, device="cpu")
    for kwargs, flags in (({"source_lang": "eng_Latn"}, ["--source-lang", "eng_Latn"]),
                          ({"source_lang": "eng_Latn", "target_lang": "xx_Yyyy"},
                           ["--source-lang", "eng_Latn", "--target-lang", "xx_Yyyy"])):
        with pytest.raises(seqtrans.Error) as raised:
            translator.translate_batch(["Hello."], **kwargs)
        result = subprocess.run([cli, "translate", "-m", str(nllb_model), "--device", "cpu", *flags],
                                input=b"Hello.\n", capture_output=True, timeout=60)
        assert result.returncode != 0
        assert result.stderr.decode().strip() == "seqtrans: error: " + str(raised.value)
    with pytest.raises(seqtrans.Error, match="give one code or one per line"):
        translator.translate_batch(LINES[:3], source_lang=["eng_Latn"] * 2, target_lang=["deu_Latn"] * 3)
