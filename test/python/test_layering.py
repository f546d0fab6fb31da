"""scripts/check_layering.py, which the build runs: the repository keeps its layers, and an include that goes
up a layer (or from a backend to the op front ends) is reported with its file and line."""

import pathlib
import subprocess
import sys

from conftest import REPOSITORY

CHECKER = REPOSITORY / "scripts" / "check_layering.py"


def check(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), str(root)], capture_output=True, text=True, check=False)


def write(root: pathlib.Path, path: str, text: str = "") -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_the_repository_keeps_its_layers():
    result = check(REPOSITORY)
    assert result.returncode == 0, result.stderr


def test_an_upward_include_is_reported(tmp_path):
    write(tmp_path, "lib/models/row_pool.h")
    write(tmp_path, "lib/ops/ops.h")
    write(tmp_path, "lib/ops/op_types.h")
    write(tmp_path, "lib/layers/dense.h", '#include "ops/ops.h"\n#include "models/row_pool.h"\n')
    write(tmp_path, "lib/cpu/kernels.h", '#include "ops/op_types.h"\n#include "ops/ops.h"\n')
    result = check(tmp_path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines == [
        "lib/cpu/kernels.h:2: cpu includes lib/ops/ops.h (ops), a layer above it or beside it "
        "(docs/ARCHITECTURE.md, section 2)",
        "lib/layers/dense.h:2: layers includes lib/models/row_pool.h (models), a layer above it or beside it "
        "(docs/ARCHITECTURE.md, section 2)",
    ]
