#!/usr/bin/env python3
"""Side-by-side CPU speed of seqtrans and CTranslate2 on the same model file and the same input lines.

Usage:
  bench_ctranslate2_cpu.py --seqtrans BUILD/seqtrans --model models/opus-demo-en-de.seqtrans \
      --input newstest2014.en [--lines 300] [--threads 2] [--beam 4,1] [--precisions fp32,int8] [--rounds 3]
      [--out DIR]

Needs `pip install ctranslate2` (and numpy, sentencepiece, protobuf: scripts/requirements.txt). The
CTranslate2 model is built from the seqtrans file itself through ctranslate2.specs (no torch, no
Hugging Face checkpoint): the same fp32 weights (the file's fp16 values widened), the same vocabulary,
the same sinusoidal positions and embedding scale. The decoder starts from the pad token's embedding, as
Hugging Face Marian and seqtrans do; pad is kept out of the outputs by an output bias of -1e9.

Timed (load excluded, both engines in this one process tree, one after the other, same lines):
- seqtrans: `seqtrans bench --device cpu` for each of --precisions (median of --runs after one warm-up;
  tokenization included), and in the first round `seqtrans translate` as a whole process for its user and
  system CPU time.
- CTranslate2: SentencePiece encode + translate_batch + decode, in-process, for each compute type
  (float32, int8) and batch type (examples --ct2-batch, tokens --ct2-tokens); the best is the reference.
  User and system CPU time of this process are read around each run.
Target tokens = best hypothesis ids, EOS excluded (what seqtrans bench counts).
With --rounds N every configuration runs N times, the rounds one after the other (each round runs every
configuration once), and each configuration's best round counts: on a shared machine a disturbed run is
slow, never fast, and alternating keeps the engines' odds alike.

Prints a table (target tokens/s, system share of CPU time, seqtrans / CTranslate2 best) and writes
DIR/bench_ctranslate2_cpu.json when --out is given.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seqtrans_file import load_tensors  # noqa: E402

PAD_LOGIT_BIAS = -1e9  # pad is never an output (the model's suppressed id)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.split("\n")[2:]))
    parser.add_argument("--seqtrans", required=True, help="the seqtrans binary (a CPU build will do)")
    parser.add_argument("--model", required=True, help="a .seqtrans model file")
    parser.add_argument("--input", required=True, help="source text, one sentence a line")
    parser.add_argument("--lines", type=int, default=0, help="only the first N lines (0 = all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", default="4,1", help="beam sizes, comma-separated (1 = greedy)")
    parser.add_argument("--runs", type=int, default=1, help="timed seqtrans bench passes (median)")
    parser.add_argument("--precisions", default="fp32", help="seqtrans --precision values, comma-separated")
    parser.add_argument("--rounds", type=int, default=1, help="times every configuration runs (best counts)")
    parser.add_argument("--max-length", type=int, default=256, help="new tokens at most")
    parser.add_argument("--ct2-batch", type=int, default=32, help="CTranslate2 examples per batch")
    parser.add_argument("--ct2-tokens", type=int, default=4096, help="CTranslate2 tokens per batch")
    parser.add_argument("--ct2-compute-types", default="float32,int8")
    parser.add_argument("--ct2-batch-types", default="examples,tokens", help="examples, tokens or both")
    parser.add_argument("--ct2-dir", help="where the converted model goes (default: a temporary directory)")
    parser.add_argument("--skip-ct2", action="store_true", help="time seqtrans alone")
    parser.add_argument("--out", help="directory for the JSON report")
    return parser.parse_args(argv)


def sinusoids(positions, width):
    """seqtrans' SINUSOIDAL_SPLIT table: sin over the first ceil(width/2) channels, cos over the rest."""
    half = (width + 1) // 2
    table = np.zeros((positions, width), dtype=np.float64)
    position = np.arange(positions, dtype=np.float64)[:, None]
    pair = np.arange(half, dtype=np.float64)[None, :]
    table[:, :half] = np.sin(position / np.power(10000.0, 2.0 * pair / width))
    cos_pairs = width - half
    table[:, half:] = np.cos(position / np.power(10000.0, 2.0 * pair[:, :cos_pairs] / width))
    return table.astype(np.float32)


def build_ct2_model(model_path, out_dir):
    """Writes a CTranslate2 model directory equivalent to the seqtrans file."""
    from ctranslate2.specs import common_spec, transformer_spec

    header, tensors = load_tensors(model_path)
    config = header.config
    if config.position_encoding != 1 or not config.shared_embeddings or not config.tied_output:
        sys.exit("bench_ctranslate2_cpu: only shared, tied, sinusoidal (OPUS-MT) models are converted")
    activations = {1: common_spec.Activation.RELU, 2: common_spec.Activation.GELU,
                   3: common_spec.Activation.SWISH, 4: common_spec.Activation.GELUTanh}
    spec = transformer_spec.TransformerSpec.from_config(
        (config.encoder.num_layers, config.decoder.num_layers), config.encoder.num_heads,
        pre_norm=config.encoder.pre_norm, activation=activations[config.activation])

    def weight(name):
        return np.ascontiguousarray(tensors[name], dtype=np.float32)

    def linear(target, prefix):
        target.weight = weight(prefix + "/weight")
        target.bias = weight(prefix + "/bias")

    def norm(target, prefix):
        target.gamma = weight(prefix + "/gamma")
        target.beta = weight(prefix + "/beta")

    def fused(target, prefixes):
        target.weight = np.concatenate([weight(p + "/weight") for p in prefixes])
        target.bias = np.concatenate([weight(p + "/bias") for p in prefixes])

    embedding = weight("shared/embedding")
    positions = sinusoids(config.max_positions, config.d_model)
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = config.embedding_scale
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embedding
    spec.decoder.embeddings.weight = embedding
    for index, layer in enumerate(spec.encoder.layer):
        prefix = f"encoder/layer_{index}"
        linear(layer.self_attention.linear[0], prefix + "/self_attention/qkv")
        linear(layer.self_attention.linear[1], prefix + "/self_attention/output")
        norm(layer.self_attention.layer_norm, prefix + "/self_attention/norm")
        linear(layer.ffn.linear_0, prefix + "/ffn/inner")
        linear(layer.ffn.linear_1, prefix + "/ffn/outer")
        norm(layer.ffn.layer_norm, prefix + "/ffn/norm")
    for index, layer in enumerate(spec.decoder.layer):
        prefix = f"decoder/layer_{index}"
        linear(layer.self_attention.linear[0], prefix + "/self_attention/qkv")
        linear(layer.self_attention.linear[1], prefix + "/self_attention/output")
        norm(layer.self_attention.layer_norm, prefix + "/self_attention/norm")
        fused(layer.attention.linear[0], [prefix + "/cross_attention/query"])
        linear(layer.attention.linear[1], prefix + "/cross_attention/kv")
        linear(layer.attention.linear[2], prefix + "/cross_attention/output")
        norm(layer.attention.layer_norm, prefix + "/cross_attention/norm")
        linear(layer.ffn.linear_0, prefix + "/ffn/inner")
        linear(layer.ffn.linear_1, prefix + "/ffn/outer")
        norm(layer.ffn.layer_norm, prefix + "/ffn/norm")
    spec.decoder.projection.weight = embedding
    bias = weight("decoder/output/bias") if config.output_bias else np.zeros(len(embedding), np.float32)
    bias = bias.copy()
    for suppressed in config.suppressed_ids:
        bias[suppressed] += PAD_LOGIT_BIAS
    spec.decoder.projection.bias = bias

    vocabulary = list(header.tokenizer.target_vocab)
    pad = vocabulary[config.pad_id]
    spec.register_source_vocabulary(list(header.tokenizer.source_vocab))
    spec.register_target_vocabulary(vocabulary)
    spec.config.bos_token = pad
    spec.config.decoder_start_token = vocabulary[config.decoder_start_id]
    spec.config.eos_token = vocabulary[config.eos_id]
    spec.config.unk_token = vocabulary[config.unk_id]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False
    spec.config.layer_norm_epsilon = config.layer_norm_epsilon
    spec.validate()
    spec.optimize(quantization=None)
    os.makedirs(out_dir, exist_ok=True)
    spec.save(out_dir)
    return header


def read_lines(path, count):
    with open(path, encoding="utf-8") as source:
        lines = source.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:count] if count > 0 else lines


class Ct2Runner:
    """CTranslate2 with the model file's SentencePiece models, timed as seqtrans bench times itself."""

    def __init__(self, model_dir, header, threads, compute_type):
        import ctranslate2
        import sentencepiece

        self.translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type,
                                                 intra_threads=threads, inter_threads=1)
        self.source = sentencepiece.SentencePieceProcessor(model_proto=header.tokenizer.source_spm)
        self.target = sentencepiece.SentencePieceProcessor(model_proto=header.tokenizer.target_spm)
        self.known = set(header.tokenizer.source_vocab)
        self.unk = header.tokenizer.source_vocab[header.config.unk_id]
        self.eos = header.tokenizer.source_vocab[header.config.eos_id]

    def pieces(self, line):
        return [p if p in self.known else self.unk for p in self.source.encode(line, out_type=str)] + [self.eos]

    def run(self, lines, beam, max_length, batch_size, batch_type):
        """Returns (seconds, target tokens, user seconds, system seconds, outputs)."""
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        batch = [self.pieces(line) for line in lines]
        results = self.translator.translate_batch(batch, beam_size=beam, max_decoding_length=max_length,
                                                  max_batch_size=batch_size, batch_type=batch_type)
        outputs = [self.target.decode(result.hypotheses[0]) for result in results]
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        tokens = sum(len(result.hypotheses[0]) for result in results)
        return seconds, tokens, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, outputs


def time_ct2(args, model_dir, header, lines, beam):
    """One run of each compute type and batch type; rows, and the float32 outputs of the fastest float32."""
    best = None
    rows = []
    for compute_type in [c for c in args.ct2_compute_types.split(",") if c]:
        runner = Ct2Runner(model_dir, header, args.threads, compute_type)
        runner.run(lines[:32], beam, args.max_length, args.ct2_batch, "examples")  # warm-up
        sizes = {"examples": args.ct2_batch, "tokens": args.ct2_tokens}
        for batch_type in [b for b in args.ct2_batch_types.split(",") if b]:
            size = sizes[batch_type]
            seconds, tokens, user, system, outputs = runner.run(lines, beam, args.max_length, size, batch_type)
            row = {"engine": "ctranslate2", "compute_type": compute_type, "batch_type": batch_type,
                   "batch_size": size, "beam": beam, "seconds": seconds, "target_tokens": tokens,
                   "target_tokens_per_s": tokens / seconds, "user_s": user, "system_s": system}
            rows.append(row)
            log(f"ctranslate2 {compute_type} {batch_type}:{size} beam {beam}: {tokens / seconds:,.0f} tok/s, "
                f"{seconds:.2f} s, user {user:.2f} s, sys {system:.2f} s")
            if compute_type == "float32" and (best is None or row["target_tokens_per_s"] > best[0]):
                best = (row["target_tokens_per_s"], outputs)
        del runner
    return rows, best


def time_seqtrans(args, input_path, beam, precision, workdir, whole_process):
    json_path = os.path.join(workdir, f"seqtrans_beam{beam}_{precision}.json")
    command = [args.seqtrans, "bench", "--device", "cpu", "-m", args.model, "-i", input_path,
               "--beam-size", str(beam), "--threads", str(args.threads), "--runs", str(args.runs),
               "--max-length", str(args.max_length), "--precision", precision, "--quiet", "--json", json_path]
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        sys.exit(f"bench_ctranslate2_cpu: seqtrans bench failed: {completed.stderr.strip()}")
    with open(json_path, encoding="utf-8") as report_file:
        report = json.load(report_file)
    real = report["results"][0]
    tokens_per_s = real["target_tokens_per_s"]
    row = {"engine": "seqtrans", "precision": precision, "beam": beam, "target_tokens_per_s": tokens_per_s,
           "bench": real}
    log(f"seqtrans {precision} beam {beam}: {tokens_per_s:,.0f} tok/s (bench)")
    if not whole_process:
        return row, None
    # A whole process for its CPU time: user and system of the child, load and start included.
    output_path = os.path.join(workdir, f"seqtrans_beam{beam}_{precision}.txt")
    translate = [args.seqtrans, "translate", "--device", "cpu", "-m", args.model, "-i", input_path, "-o",
                 output_path, "--beam-size", str(beam), "--threads", str(args.threads), "--max-length",
                 str(args.max_length), "--precision", precision, "--quiet"]
    start = time.perf_counter()
    process = subprocess.Popen(translate, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"bench_ctranslate2_cpu: seqtrans translate failed: {process.stderr.read().decode()}")
    with open(output_path, encoding="utf-8") as output_file:
        outputs = output_file.read().split("\n")[:-1]
    row.update({"translate_wall_s": wall, "user_s": usage.ru_utime, "system_s": usage.ru_stime})
    log(f"seqtrans {precision} translate: wall {wall:.2f} s, user {usage.ru_utime:.2f} s, "
        f"sys {usage.ru_stime:.2f} s")
    return row, outputs


def fastest(rows, **match):
    """The row with the most target tokens/s among those whose fields equal `match`."""
    chosen = [r for r in rows if all(r.get(key) == value for key, value in match.items())]
    return max(chosen, key=lambda r: r["target_tokens_per_s"]) if chosen else None


def main():
    args = parse_args()
    beams = [int(b) for b in args.beam.split(",") if b]
    lines = read_lines(args.input, args.lines)
    report = {"lines": len(lines), "threads": args.threads, "input": args.input, "model": args.model,
              "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"),
              "load_average_before": os.getloadavg(), "rows": []}
    with tempfile.TemporaryDirectory() as workdir:
        input_path = os.path.join(workdir, "input.txt")
        with open(input_path, "w", encoding="utf-8") as input_file:
            input_file.write("\n".join(lines) + "\n")
        model_dir = args.ct2_dir or os.path.join(workdir, "ct2")
        header = None
        if not args.skip_ct2:
            import ctranslate2
            report["ctranslate2_version"] = ctranslate2.__version__
            if not os.path.exists(os.path.join(model_dir, "model.bin")):
                log(f"converting {args.model} for CTranslate2 into {model_dir}")
                build_ct2_model(args.model, model_dir)
            header, _ = load_tensors(args.model)
        precisions = [p for p in args.precisions.split(",") if p]
        rows, first_outputs, ct2_outputs = [], {}, {}
        for round_index in range(args.rounds):
            for beam in beams:
                for precision in precisions:
                    row, outputs = time_seqtrans(args, input_path, beam, precision, workdir, round_index == 0)
                    row["round"] = round_index
                    rows.append(row)
                    if outputs is not None:
                        first_outputs[(beam, precision)] = row, outputs
                if args.skip_ct2:
                    continue
                ct2_rows, best = time_ct2(args, model_dir, header, lines, beam)
                for row in ct2_rows:
                    row["round"] = round_index
                rows.extend(ct2_rows)
                if best and (beam not in ct2_outputs or best[0] > ct2_outputs[beam][0]):
                    ct2_outputs[beam] = best
        report["rows"] = rows
    print(f"\n{len(lines)} lines, {args.threads} threads, target tokens/s, best of {args.rounds} round(s) "
          f"(load average before: {report['load_average_before'][0]:.2f})")
    print(f"{'beam':>4}  {'seqtrans':<9}  {'tok/s':>7}  {'sys share':>9}  {'CT2 best':>8}  {'(type)':<24}  "
          f"{'ratio':>6}  {'CT2 int8':>8}  {'ratio':>6}  same as CT2 fp32")
    for beam in beams:
        theirs = fastest(rows, engine="ctranslate2", beam=beam)
        theirs_int8 = fastest(rows, engine="ctranslate2", beam=beam, compute_type="int8")
        for precision in precisions:
            ours = fastest(rows, engine="seqtrans", beam=beam, precision=precision)
            timed, outputs = first_outputs[(beam, precision)]
            cpu = timed["user_s"] + timed["system_s"]
            share = timed["system_s"] / cpu if cpu > 0 else 0.0
            line = f"{beam:>4}  {precision:<9}  {ours['target_tokens_per_s']:>7,.0f}  {share:>8.1%}"
            if theirs is not None:
                kind = f"{theirs['compute_type']} {theirs['batch_type']}:{theirs['batch_size']}"
                line += (f"  {theirs['target_tokens_per_s']:>8,.0f}  {kind:<24}  "
                         f"{ours['target_tokens_per_s'] / theirs['target_tokens_per_s']:>5.2f}x")
            if theirs_int8 is not None:
                line += (f"  {theirs_int8['target_tokens_per_s']:>8,.0f}  "
                         f"{ours['target_tokens_per_s'] / theirs_int8['target_tokens_per_s']:>5.2f}x")
            if beam in ct2_outputs:
                same = sum(a == b for a, b in zip(outputs, ct2_outputs[beam][1]))
                report.setdefault("identical_to_ct2_float32", {})[f"beam{beam}_{precision}"] = same
                line += f"  {same}/{len(lines)}"
            print(line)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench_ctranslate2_cpu.json"), "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
