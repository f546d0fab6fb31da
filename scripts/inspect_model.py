#!/usr/bin/env python3
"""Prints a seqtrans model file's header: configuration, tokenizer summary and tensor index.

Usage: inspect_model.py FILE [--stats] [--vocab N] [--languages]
  --stats      also print min / max / mean / std of every tensor (reads the weights)
  --vocab N    print the first N pieces of each vocabulary (default 10)
  --languages  print only the language codes a multilingual model accepts (--source-lang / --target-lang)
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


def print_generation(generation):
    """The checkpoint's decoding defaults and the seqtrans default each one gives (or the built-in one)."""
    print("generation defaults (from the checkpoint; command-line options override them):")
    if generation.HasField("max_length"):
        print(f"  max_length: {generation.max_length}  -> --max-length default {generation.max_length - 1} 0 "
              f"(model file; max_length counts the decoder start token)")
    else:
        print("  max_length: absent  -> --max-length default 256 0 (built-in)")
    if generation.HasField("num_beams"):
        print(f"  num_beams: {generation.num_beams}  -> --beam-size default {generation.num_beams} (model file)")
    else:
        print("  num_beams: absent  -> --beam-size default 4 (built-in)")
    if generation.HasField("forced_eos_token_id"):
        print(f"  forced_eos_token_id: {generation.forced_eos_token_id}  -> --force-eos auto: the last allowed "
              "token is EOS (model file)")
    else:
        print("  forced_eos_token_id: absent  -> --force-eos auto: no forced EOS (built-in)")


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
    codes = tokenizer.language_codes
    if codes:
        shown = ", ".join(f"{entry.code}:{entry.id}" for entry in codes[:count])
        print(f"  language_codes: {len(codes)}; {shown}{', ...' if len(codes) > count else ''}  "
              "(all: --languages)")
    else:
        print("  language_codes: none (a single language pair)")
    print(f"  source_language: {pb.LanguagePlacement.Name(tokenizer.source_language)}")
    if tokenizer.space_prefix != pb.SPACE_PREFIX_UNSPECIFIED:
        print(f"  prompt: {'BOS first' if tokenizer.add_bos else 'no BOS'}, space prefix "
              f"{pb.SpacePrefix.Name(tokenizer.space_prefix)} (decoder-only)")


def print_languages(header):
    """One line per language code: the code a user passes to --source-lang / --target-lang, and its token id."""
    codes = header.tokenizer.language_codes
    if not codes:
        print("no language codes: this model translates one language pair and takes no --source-lang / "
              "--target-lang")
        return
    placement = {pb.SOURCE_PREFIX: "before the source tokens", pb.SOURCE_SUFFIX: "after the source's EOS"}
    print(f"{len(codes)} language codes (the source code goes "
          f"{placement.get(header.tokenizer.source_language, 'nowhere')}; the target code is forced first):")
    for entry in codes:
        piece = header.tokenizer.source_vocab[entry.id] if entry.id < len(header.tokenizer.source_vocab) else "?"
        print(f"  {entry.code}\t{entry.id}" + (f"\t{piece}" if piece != entry.code else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--stats", action="store_true", help="print statistics of every tensor")
    parser.add_argument("--vocab", type=int, default=10, metavar="N", help="vocabulary pieces to show")
    parser.add_argument("--languages", action="store_true", help="list the language codes and their ids only")
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

    if args.languages:
        print_languages(header)
        return
    print(f"file: {args.file}")
    print(f"format_version: {header.format_version}")
    print(f"description: {header.description}")
    print("config:")
    print_message(header.config, "  ")
    print_generation(header.generation)
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
