#!/usr/bin/env bash
# Regenerates scripts/seqtrans_model_pb2.py from proto/model.proto.
# The proto is compiled under the name seqtrans_model.proto so that its entry in protobuf's global
# descriptor pool cannot clash with another package's "model.proto".
# Generated with protoc 3.21; the converter falls back to the pure-Python protobuf runtime if the
# installed runtime rejects this generated code (see scripts/seqtrans_proto.py).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp proto/model.proto "$work/seqtrans_model.proto"
protoc --proto_path="$work" --python_out="$work" "$work/seqtrans_model.proto"
cp "$work/seqtrans_model_pb2.py" scripts/seqtrans_model_pb2.py
echo "gen_proto: wrote scripts/seqtrans_model_pb2.py ($(protoc --version))"
