#!/usr/bin/env python3
"""Cross-checks seqtrans's Tokenizer against Hugging Face's MarianTokenizer (not run by CI).

Needs transformers and sentencepiece. Three steps:

  # 1. A Marian-style checkpoint dir (source.spm, target.spm, vocab.json in OPUS-MT order: "</s>" 0,
  #    "<unk>" 1, the other pieces shuffled, "<pad>" last; some pieces left out so that remapping and
  #    unknown pieces are exercised). Either train tiny models or pass existing .spm files.
  text_hf_crosscheck.py make-checkpoint --out /tmp/marian \
      --train-source multi30k/train.en --train-target multi30k/train.de --vocab-size 8000
  # 2. What MarianTokenizer makes of some lines: printed as "ids<TAB>line", and with --bundle written as
  #    the files the C++ side reads (pieces by id, special ids, inputs and expected ids/texts).
  text_hf_crosscheck.py dump --checkpoint /tmp/marian --source-lines some.en --target-lines some.de \
      --bundle /tmp/crosscheck
  # 3. The hidden unit test compares seqtrans's Tokenizer with that bundle:
  SEQTRANS_HF_CROSSCHECK_DIR=/tmp/crosscheck build/test/seqtrans_unit_tests "[.hf_crosscheck]" -s
"""
import argparse
import json
import os
import random
import shutil
import sys
import warnings

# Lines that probe MarianTokenizer's own text handling beyond plain sentences.
EDGE_LINES = [
    "",
    "   ",
    "\t",
    ">>de<< A man is walking.",
    ">>fr<<A man is walking.",
    ">>xx<< unknown language code",
    " >>de<< leading space, so no code",
    "A </s> in the middle",
    "a</s>b",
    "<unk> at the start and <pad> later",
    "Two  spaces   and\ttabs",
    "  leading and trailing spaces  ",
    "Ünïcödé façade naïve coöperate Zürich straße",
    "Emoji 😀 and CJK 中文 and Cyrillic кошка",
    "Quotes “curly” ‘single’ «guillemets» — dashes – and … ellipsis",
    "Non-breaking\u00a0space and ideographic\u3000space",
    "Fullwidth ＡＢＣ１２３ and ligature ﬁ",
    "Control\x01chars\x7fhere",
    "Replacement \ufffd character",
    "Numbers 3.14159, 1,000,000 and 42%",
    "URL https://example.com/a?b=c&d=e",
    "⁇ sentencepiece's unknown surface",
    "x" * 300,
]


def load_tokenizer(checkpoint):
    warnings.filterwarnings("ignore")
    from transformers import MarianTokenizer

    return MarianTokenizer(
        source_spm=os.path.join(checkpoint, "source.spm"),
        target_spm=os.path.join(checkpoint, "target.spm"),
        vocab=os.path.join(checkpoint, "vocab.json"),
    )


def read_lines(path, limit):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for _, line in zip(range(limit), f)]


def train_spm(path, prefix, vocab_size):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=path, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        character_coverage=0.9995, minloglevel=2)
    return prefix + ".model"


def make_checkpoint(args):
    import sentencepiece as spm

    os.makedirs(args.out, exist_ok=True)
    sources = {"source": (args.source_spm, args.train_source), "target": (args.target_spm, args.train_target)}
    for side, (spm_path, train_path) in sources.items():
        if not spm_path:
            if not train_path:
                sys.exit(f"make-checkpoint: give --{side}-spm or --train-{side}")
            spm_path = train_spm(train_path, os.path.join(args.out, f"trained_{side}"), args.vocab_size)
        shutil.copy(spm_path, os.path.join(args.out, f"{side}.spm"))

    pieces = []
    seen = set()
    for side in ("source", "target"):
        model = spm.SentencePieceProcessor(model_file=os.path.join(args.out, f"{side}.spm"))
        for i in range(model.get_piece_size()):
            piece = model.id_to_piece(i)
            if piece in ("<unk>", "<s>", "</s>", "<pad>") or piece in seen:
                continue
            seen.add(piece)
            pieces.append(piece)
    random.Random(args.seed).shuffle(pieces)
    if args.drop_every:
        pieces = [p for k, p in enumerate(pieces) if k % args.drop_every != args.drop_every - 1]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces + [f">>{code}<<" for code in args.language_codes]:
        vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"model_max_length": 512, "separate_vocabs": False}, f)
    print(f"{args.out}: vocab.json with {len(vocab)} entries", file=sys.stderr)


def decode_cases(tokenizer, target_lines):
    """Target id sequences to decode: references, and references with unk/pad/eos and source-only pieces."""
    vocab = tokenizer.get_vocab()
    target_pieces = {tokenizer.spm_target.id_to_piece(i) for i in range(tokenizer.spm_target.get_piece_size())}
    source_only = sorted(i for p, i in vocab.items() if p not in target_pieces and p.startswith("▁"))
    rng = random.Random(1)
    cases = []
    for line in target_lines:
        ids = tokenizer(text_target=line).input_ids
        cases.append(ids)
        noisy = list(ids[:-1])
        for special in (tokenizer.unk_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id):
            noisy.insert(rng.randrange(len(noisy) + 1), special)
        if source_only:
            noisy.insert(rng.randrange(len(noisy) + 1), rng.choice(source_only))
        cases.append(noisy + [tokenizer.eos_token_id])
    return cases


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            assert "\n" not in line and "\r" not in line, repr(line)
            f.write(line + "\n")


def dump(args):
    tokenizer = load_tokenizer(args.checkpoint)
    inputs = list(EDGE_LINES)
    for path in args.source_lines:
        inputs += read_lines(path, args.limit)
    encoded = [tokenizer(line).input_ids for line in inputs]
    for ids, line in zip(encoded, inputs):
        print(" ".join(map(str, ids)) + "\t" + line)

    if not args.bundle:
        return
    os.makedirs(args.bundle, exist_ok=True)
    for name in ("source.spm", "target.spm"):
        shutil.copy(os.path.join(args.checkpoint, name), os.path.join(args.bundle, name))
    # A shared vocabulary (separate_vocabs=False): both sides use vocab.json, index = model id.
    size = max(tokenizer.encoder.values()) + 1
    by_id = [""] * size
    for piece, i in tokenizer.encoder.items():
        by_id[i] = piece
    write_lines(os.path.join(args.bundle, "source_vocab.txt"), by_id)
    write_lines(os.path.join(args.bundle, "target_vocab.txt"), by_id)
    write_lines(os.path.join(args.bundle, "special_ids.txt"),
                [f"{tokenizer.eos_token_id} {tokenizer.unk_token_id} {tokenizer.pad_token_id}"])
    write_lines(os.path.join(args.bundle, "encode_input.txt"), inputs)
    write_lines(os.path.join(args.bundle, "encode_ids.txt"), [" ".join(map(str, ids)) for ids in encoded])

    targets = []
    for path in args.target_lines:
        targets += read_lines(path, args.limit)
    cases = decode_cases(tokenizer, targets)
    write_lines(os.path.join(args.bundle, "decode_ids.txt"), [" ".join(map(str, ids)) for ids in cases])
    write_lines(os.path.join(args.bundle, "decode_text.txt"),
                [tokenizer.decode(ids, skip_special_tokens=True) for ids in cases])
    print(f"{args.bundle}: {len(inputs)} encode and {len(cases)} decode cases", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    make = commands.add_parser("make-checkpoint", help="write a Marian-style tokenizer dir")
    make.add_argument("--out", required=True)
    make.add_argument("--source-spm")
    make.add_argument("--target-spm")
    make.add_argument("--train-source", help="train the source model on this text file instead")
    make.add_argument("--train-target", help="train the target model on this text file instead")
    make.add_argument("--vocab-size", type=int, default=8000)
    make.add_argument("--seed", type=int, default=0, help="shuffles the vocab.json order")
    make.add_argument("--drop-every", type=int, default=50, help="leave every Nth piece out of vocab.json")
    make.add_argument("--language-codes", nargs="*", default=["de", "fr"])

    dump_parser = commands.add_parser("dump", help="print MarianTokenizer ids, optionally write a bundle")
    dump_parser.add_argument("--checkpoint", required=True)
    dump_parser.add_argument("--source-lines", nargs="*", default=[])
    dump_parser.add_argument("--target-lines", nargs="*", default=[])
    dump_parser.add_argument("--limit", type=int, default=100, help="lines taken from each file")
    dump_parser.add_argument("--bundle", help="directory for the C++ side's input files")

    args = parser.parse_args()
    make_checkpoint(args) if args.command == "make-checkpoint" else dump(args)


if __name__ == "__main__":
    main()
