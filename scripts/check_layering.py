#!/usr/bin/env python3
"""Fails when a source file includes a header from a layer above its own (docs/ARCHITECTURE.md, section 2).

Usage: check_layering.py [ROOT]   (default: the repository this script is in)

The build runs it before compiling the library (CMake target seqtrans_layering), so an upward include stops
the build with the file, the line and the rule it breaks. A layer is a directory of lib/ (or cuda/), except
that ops/op_types.h and ops/prepared_weight.h form the op-types layer below the backends, which include them
instead of ops/ops.h. Tests, scripts and generated files are not checked.
"""
import os
import re
import sys

# Each layer and the layers below it that it may include (besides itself).
ALLOWED = {
    "core": set(),
    "text": {"core"},
    "op_types": {"core"},
    "cpu": {"core", "op_types"},
    "cuda": {"core", "op_types"},
    "ops": {"core", "op_types", "cpu", "cuda"},
    "format": {"core", "op_types"},
    "layers": {"core", "op_types", "ops", "format"},
    "search": {"core", "op_types", "ops"},
    "models": {"core", "op_types", "ops", "format", "layers", "search"},
    "batching": {"core"},
    "scheduler": {"core", "search"},
    "engine": {"core", "op_types", "ops", "format", "layers", "search", "models", "scheduler", "batching", "text"},
    "bench": {"core", "op_types", "cpu", "cuda", "ops", "format", "layers", "search", "models", "scheduler",
              "batching", "text", "engine"},
}
OP_TYPES = {"lib/ops/op_types.h", "lib/ops/prepared_weight.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")


def layer_of(path):
    """The layer of a repository-relative path, or None outside the layered code."""
    if path in OP_TYPES:
        return "op_types"
    parts = path.split("/")
    if parts[0] == "cuda":
        return "cuda"
    if parts[0] != "lib":
        return None
    if len(parts) == 2:
        return "engine"  # lib/translator.h and the other files at the top of lib/
    return parts[1] if parts[1] in ALLOWED else None


def resolve(root, included):
    """The repository-relative path an include names (includes are rooted at lib/ or the repository)."""
    for candidate in ("lib/" + included, included):
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None  # a system, generated or app-local header


def violations(root):
    found = []
    for top in ("lib", "cuda"):
        for directory, subdirectories, files in os.walk(os.path.join(root, top)):
            subdirectories.sort()  # the same order of reports on every file system
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
                layer = layer_of(path)
                if layer is None:
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        target = resolve(root, match.group(1)) if match else None
                        target_layer = layer_of(target) if target else None
                        if target_layer is None or target_layer == layer or target_layer in ALLOWED[layer]:
                            continue
                        found.append(f"{path}:{number}: {layer} includes {target} ({target_layer}), a layer above "
                                     f"it or beside it (docs/ARCHITECTURE.md, section 2)")
    return found


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for message in found:
        print(message, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
