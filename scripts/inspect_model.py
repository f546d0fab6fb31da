#!/usr/bin/env python3
"""Prints a seqtrans model file's header: configuration, tokenizer summary and tensor index.

Usage: inspect_model.py FILE [--stats] [--vocab N]
  --stats    also print min / max / mean / std of every tensor (reads the weights)
  --vocab N  print the first N pieces of each vocabulary (default 10)
"""
import argparse
import sys

import numpy as np

from seqtrans_file import NUMPY_DTYPES, FormatError, load_tensors, pb, read_header


def print_message(message, indent):
    """Every field, zeros included (proto3 text format would hide eos_id: 0 and false flags)."""
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        # FieldDescriptor.label is gone in protobuf 7; is_repeated is missing before 5.x.
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if field.message_type is not None and not repeated:
            print(f"{indent}{field.name}:")
            print_message(value, indent + "  ")
        elif field.enum_type is not None and not repeated:
            print(f"{indent}{field.name}: {field.enum_type.values_by_number[value].name}")
        elif repeated:
            print(f"{indent}{field.name}: {list(value)}")
        else:
            print(f"{indent}{field.name}: {value:g}" if isinstance(value, float) else f"{indent}{field.name}: {value}")


def print_tokenizer(tokenizer, count):
    print("tokenizer:")
    print(f"  source_spm: {len(tokenizer.source_spm):,} bytes, target_spm: {len(tokenizer.target_spm):,} bytes"
          + ("  (identical)" if tokenizer.source_spm == tokenizer.target_spm else ""))
    for name, pieces in (("source_vocab", tokenizer.source_vocab), ("target_vocab", tokenizer.target_vocab)):
        if not pieces:
            print(f"  {name}: empty (SentencePiece ids are model ids)")
            continue
        shown = ", ".join(f"{index}:{piece!r}" for index, piece in enumerate(pieces[:count]))
        print(f"  {name}: {len(pieces):,} pieces; {shown}{', ...' if len(pieces) > count else ''}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--stats", action="store_true", help="print statistics of every tensor")
    parser.add_argument("--vocab", type=int, default=10, metavar="N", help="vocabulary pieces to show")
    args = parser.parse_args()
    try:
        if args.stats:
            header, tensors = load_tensors(args.file)
        else:
            header, data_start = read_header(args.file)
            tensors = None
    except FormatError as error:
        print(f"inspect_model: error: {error}", file=sys.stderr)
        sys.exit(1)

    print(f"file: {args.file}")
    print(f"format_version: {header.format_version}")
    print(f"description: {header.description}")
    print("config:")
    print_message(header.config, "  ")
    print_tokenizer(header.tokenizer, args.vocab)

    total_parameters = 0
    total_bytes = 0
    print(f"tensors ({len(header.tensors)}):")
    width = max((len(entry.name) for entry in header.tensors), default=4)
    for entry in header.tensors:
        count = int(np.prod(entry.shape, dtype=np.int64))
        total_parameters += count
        total_bytes += entry.size
        line = (f"  {entry.name:<{width}}  {pb.DataType.Name(entry.dtype):<4}  "
                f"{str(list(entry.shape)):<14}  offset {entry.offset:>11,}  size {entry.size:>11,}")
        if tensors is not None:
            values = tensors[entry.name].astype(np.float64)
            line += (f"  min {values.min():+.4g} max {values.max():+.4g} "
                     f"mean {values.mean():+.4g} std {values.std():.4g}")
        print(line)
    dtypes = sorted({pb.DataType.Name(entry.dtype) for entry in header.tensors if entry.dtype in NUMPY_DTYPES})
    print(f"total: {total_parameters:,} parameters, {total_bytes:,} bytes of tensor data ({', '.join(dtypes)})")


if __name__ == "__main__":
    main()
