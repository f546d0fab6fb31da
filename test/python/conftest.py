"""Shared fixtures of the Python package's tests: the installed package, the CLI to compare it with, and
inputs from the golden files."""

import os
import pathlib
import subprocess
import sys

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
BUNDLED_MODEL = REPOSITORY / "models" / "opus-demo-en-de.seqtrans"


@pytest.fixture(scope="session")
def cli() -> str:
    """The seqtrans binary: $SEQTRANS_CLI (scripts/test.sh sets it, and then it must exist), else build/seqtrans."""
    path = os.environ.get("SEQTRANS_CLI")
    if path:
        assert os.access(path, os.X_OK), f"SEQTRANS_CLI={path} is not an executable"
        return path
    path = str(REPOSITORY / "build" / "seqtrans")
    if not os.access(path, os.X_OK):
        pytest.skip("no CLI to compare with: build it (scripts/setup.sh) or set SEQTRANS_CLI")
    return path


def golden_sources(count: int) -> list:
    """Source lines of the golden files: news, Multi30k, Tatoeba and odd lines, 1 to 229 tokens."""
    lines = []
    with open(REPOSITORY / "test" / "data" / "golden" / "marian_tiny_greedy.tsv", encoding="utf-8") as golden:
        for row in golden:
            if not row.startswith("#"):
                lines.append(row.split("\t")[0])
    return lines[:count]


@pytest.fixture(scope="session")
def translator():
    """One CPU translator of the bundled model, shared by the tests that need no settings of their own."""
    import seqtrans

    return seqtrans.Translator(device="cpu")


@pytest.fixture(scope="session")
def llama_model(tmp_path_factory) -> pathlib.Path:
    """test/data/llama_tiny_gqa2 (a tiny LlamaForCausalLM checkpoint) converted by scripts/convert_hf.py, once."""
    path = tmp_path_factory.mktemp("llama") / "llama_tiny_gqa2.seqtrans"
    result = subprocess.run([sys.executable, str(REPOSITORY / "scripts" / "convert_hf.py"),
                             str(REPOSITORY / "test" / "data" / "llama_tiny_gqa2"), str(path), "--dtype", "fp32"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return path

