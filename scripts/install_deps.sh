#!/usr/bin/env bash
# Installs what seqtrans needs to build and test on a fresh Debian/Ubuntu machine: the system packages
# (plus any named on the command line) and the converter's Python packages. Idempotent: what is already
# there is skipped. Usage: scripts/install_deps.sh [EXTRA_PACKAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."

system_packages=(build-essential cmake ninja-build pkg-config protobuf-compiler libprotobuf-dev
  libsentencepiece-dev libcli11-dev libfmt-dev catch2 libopenblas-dev python3 python3-pip python3-venv python3-dev "$@")
missing=()
for package in "${system_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The converter's Python dependencies (no torch needed for safetensors checkpoints).
if ! python3 -c "import numpy, safetensors, google.protobuf, sentencepiece" 2>/dev/null; then
  echo "install_deps: installing Python packages from scripts/requirements.txt" >&2
  python3 -m pip install -q -r scripts/requirements.txt 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r scripts/requirements.txt
fi
