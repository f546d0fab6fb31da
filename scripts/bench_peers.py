#!/usr/bin/env python3
"""Side-by-side speed of seqtrans and Hugging Face transformers generate() on the same GPU, in one run.

Usage:
  bench_peers.py --seqtrans BUILD/seqtrans --out DIR [synthetic options]
                 [--hf-checkpoint DIR --seqtrans-model FILE --input newstest2014.en]

Workload (b), synthetic: a random-weight Transformer of the same shape in both engines (default
Transformer-base: 6+6 layers, d_model 512, 8 heads, ffn 2048, vocab 32000, ReLU, shared and tied
embeddings, output bias), random source ids ending in EOS, and exactly --target-length generated
tokens (HF: min_new_tokens = max_new_tokens; seqtrans: `bench --synthetic`, EOS suppressed until the
length), over batch x beam. Generated tokens/s = batch x target_length / median time of one
generate() call (--runs after --warmup), encoder included.

Workload (a), real (when --hf-checkpoint, --seqtrans-model and --input are given): the input file
(WMT newstest2014 English, 3,003 lines) translated with beam --real-beam in batches of --real-batch
sentences, tokenization and detokenization included, max 256 new tokens: HF MarianTokenizer +
generate() + batch_decode over the lines in file order, and `seqtrans bench -m MODEL -i FILE` with
--max-batch-size --real-batch (the token budget lifted so that batches hold --real-batch sentences).
Target tokens = generated ids without the decoder start, EOS and padding (seqtrans counts the same).

Writes DIR/bench_peers.json (every number, versions, device), DIR/seqtrans_synthetic.json and
DIR/seqtrans_real.json (the seqtrans bench reports), DIR/bench_peers.png (generated tokens/s against
batch size, both engines, each beam), and prints a ratio table last.

Runs on the CPU too (--device cpu --dtype fp32), for checking the script with a tiny shape:
  bench_peers.py --seqtrans build/seqtrans --out /tmp/peers --device cpu --dtype fp32 --layers 2,2 \
      --d-model 64 --heads 4 --ffn 128 --vocab 500 --batch 1,4 --beam 1,2 --source-length 8 \
      --target-length 8 --runs 2 --warmup 1 --cpu-threads 1
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

EOS_ID = 0  # seqtrans' synthetic model: EOS 0, unknown 1, pad = decoder start = vocab - 1


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def int_list(text):
    try:
        values = [int(item) for item in text.split(",") if item]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' needs positive integers")
    return values


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.split("\n")[2:]))
    parser.add_argument("--seqtrans", required=True, help="the seqtrans binary")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "fp32"])
    shape = parser.add_argument_group("synthetic workload (b)")
    shape.add_argument("--layers", type=int_list, default=[6, 6], help="encoder,decoder layers")
    shape.add_argument("--d-model", type=int, default=512)
    shape.add_argument("--heads", type=int, default=8)
    shape.add_argument("--ffn", type=int, default=2048)
    shape.add_argument("--vocab", type=int, default=32000)
    shape.add_argument("--family", default="marian", choices=["marian", "m2m100", "mbart"],
                       help="the layout in both engines: MarianMTModel, M2M100ForConditionalGeneration (NLLB-200's "
                            "architecture) or MBartForConditionalGeneration; seqtrans bench --family")
    shape.add_argument("--batch", type=int_list, default=[1, 16, 64, 128])
    shape.add_argument("--beam", type=int_list, default=[1, 4])
    shape.add_argument("--source-length", type=int, default=32, help="source ids per sentence, EOS included")
    shape.add_argument("--target-length", type=int, default=32, help="generated tokens per sentence, forced")
    shape.add_argument("--runs", type=int, default=5, help="timed runs per point (median reported)")
    shape.add_argument("--warmup", type=int, default=2, help="untimed runs per point first")
    shape.add_argument("--skip-synthetic", action="store_true")
    real = parser.add_argument_group("real workload (a)")
    real.add_argument("--hf-checkpoint", help="a MarianMT checkpoint directory (with its tokenizer files)")
    real.add_argument("--seqtrans-model", help="the same checkpoint converted by scripts/convert_marian.py")
    real.add_argument("--input", help="source text, one sentence per line (newstest2014.en)")
    real.add_argument("--max-lines", type=int, default=0, help="use only the first N lines (0 = all)")
    real.add_argument("--real-beam", type=int, default=4)
    real.add_argument("--real-batch", type=int, default=32, help="sentences per batch")
    real.add_argument("--max-new-tokens", type=int, default=256, help="output limit in both engines")
    real.add_argument("--real-runs", type=int, default=1, help="timed passes over the file per engine")
    real.add_argument("--hf-warmup-lines", type=int, default=64,
                      help="HF warm-up: translate this many lines first, untimed (seqtrans warms up on one pass)")
    parser.add_argument("--cpu-threads", type=int, default=0,
                        help="CPU threads for both engines (torch.set_num_threads, seqtrans --threads); 0 = defaults")
    parser.add_argument("--peak-tflops", type=float, help="passed to seqtrans bench (floor)")
    parser.add_argument("--peak-bandwidth-gbs", type=float, help="passed to seqtrans bench (floor)")
    args = parser.parse_args(argv)
    if len(args.layers) == 1:
        args.layers = args.layers * 2
    if len(args.layers) != 2:
        parser.error("--layers takes one or two numbers")
    real_given = [args.hf_checkpoint, args.seqtrans_model, args.input]
    if any(real_given) and not all(real_given):
        parser.error("the real workload needs --hf-checkpoint, --seqtrans-model and --input together")
    if args.device == "cpu" and args.dtype == "fp16":
        parser.error("--dtype fp16 needs --device cuda")
    return args


# --- environment ----------------------------------------------------------------------------------

def torch_setup(args):
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_peers: error: --device cuda but torch sees no GPU (use --device cpu --dtype fp32)")
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.cpu_threads > 0:
        torch.set_num_threads(args.cpu_threads)
    return torch, torch.device(args.device), torch.float16 if args.dtype == "fp16" else torch.float32


def synchronize(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def environment(args, torch):
    import transformers
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "device": args.device, "dtype": args.dtype,
            "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    info["torch_threads"] = torch.get_num_threads()
    return info


def median_of(run, runs, warmup):
    for _ in range(warmup):
        run()
    seconds = [run() for _ in range(runs)]
    return statistics.median(seconds), seconds


# --- seqtrans ---------------------------------------------------------------------------------------

def run_seqtrans(args, flags, json_path):
    command = [args.seqtrans, "bench", "--device", args.device, "--precision", args.dtype, "--quiet",
               "--json", json_path] + flags
    if args.cpu_threads > 0:
        command += ["--threads", str(args.cpu_threads)]
    if args.peak_tflops and args.peak_bandwidth_gbs:
        command += ["--peak-tflops", str(args.peak_tflops), "--peak-bandwidth-gbs", str(args.peak_bandwidth_gbs)]
    log("running " + " ".join(command))
    completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        sys.exit(f"bench_peers: error: seqtrans bench failed ({completed.returncode}): {completed.stderr.strip()}")
    print(completed.stdout, file=sys.stderr)
    with open(json_path, encoding="utf-8") as report_file:
        return json.load(report_file)


def seqtrans_synthetic(args):
    flags = ["--synthetic", "--layers", f"{args.layers[0]},{args.layers[1]}", "--d-model", str(args.d_model),
             "--heads", str(args.heads), "--ffn", str(args.ffn), "--vocab", str(args.vocab),
             "--batch", ",".join(map(str, args.batch)), "--beam", ",".join(map(str, args.beam)),
             "--source-length", str(args.source_length), "--target-length", str(args.target_length),
             "--runs", str(args.runs), "--warmup", str(args.warmup), "--family", args.family]
    report = run_seqtrans(args, flags, os.path.join(args.out, "seqtrans_synthetic.json"))
    points = {}
    for row in report["results"]:
        points[(row["beam"], row["batch"])] = {
            "median_s": row["median_s"], "generated_tokens_per_s": row["generated_tokens_per_s"],
            "peak_memory_bytes": row["peak_memory_bytes"], "x_of_floor": row.get("x_of_floor")}
    return points, report


def seqtrans_real(args, lines_path):
    flags = ["-m", args.seqtrans_model, "-i", lines_path, "-b", str(args.real_beam),
             "--max-batch-size", str(args.real_batch), "--max-batch-tokens", str(1 << 24),
             "--max-length", str(args.max_new_tokens), "--runs", str(args.real_runs), "--warmup", "1"]
    report = run_seqtrans(args, flags, os.path.join(args.out, "seqtrans_real.json"))
    row = report["results"][0]
    return {"median_s": row["median_s"], "sentences": row["lines"], "target_tokens": row["target_tokens"],
            "target_tokens_per_s": row["target_tokens_per_s"], "sentences_per_s": row["sentences_per_s"],
            "x_of_floor": row.get("x_of_floor")}, report


# --- Hugging Face -----------------------------------------------------------------------------------

def hf_family_config(args, pad):
    """M2M-100 or mBART of the synthetic shape: the layouts seqtrans bench --family m2m100 / mbart runs. Their
    positions start at pad + 1, so pad is 1 here (random source ids never take it); speed is all that is compared."""
    import transformers
    config_class = transformers.M2M100Config if args.family == "m2m100" else transformers.MBartConfig
    return config_class(
        vocab_size=args.vocab, d_model=args.d_model, encoder_layers=args.layers[0], decoder_layers=args.layers[1],
        encoder_attention_heads=args.heads, decoder_attention_heads=args.heads, encoder_ffn_dim=args.ffn,
        decoder_ffn_dim=args.ffn, activation_function="relu" if args.family == "m2m100" else "gelu",
        max_position_embeddings=max(1024, args.source_length, args.target_length + 1), scale_embedding=True,
        tie_word_embeddings=True, pad_token_id=1, eos_token_id=EOS_ID, decoder_start_token_id=pad,
        bos_token_id=1, forced_eos_token_id=None)


def hf_synthetic_model(args, torch, device, dtype):
    from transformers import MarianConfig, MarianMTModel
    pad = args.vocab - 1
    if args.family != "marian":
        import transformers
        model_class = (transformers.M2M100ForConditionalGeneration if args.family == "m2m100"
                       else transformers.MBartForConditionalGeneration)
        torch.manual_seed(1)
        return model_class(hf_family_config(args, pad)).to(device=device, dtype=dtype).eval()
    config = MarianConfig(
        vocab_size=args.vocab, decoder_vocab_size=args.vocab, d_model=args.d_model,
        encoder_layers=args.layers[0], decoder_layers=args.layers[1],
        encoder_attention_heads=args.heads, decoder_attention_heads=args.heads,
        encoder_ffn_dim=args.ffn, decoder_ffn_dim=args.ffn, activation_function="relu",
        max_position_embeddings=max(1024, args.source_length, args.target_length + 1),
        scale_embedding=True, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        pad_token_id=pad, eos_token_id=EOS_ID, decoder_start_token_id=pad, forced_eos_token_id=None)
    torch.manual_seed(1)
    model = MarianMTModel(config).to(device=device, dtype=dtype).eval()
    return model


def hf_synthetic(args, torch, device, dtype):
    model = hf_synthetic_model(args, torch, device, dtype)
    points = {}
    generator = torch.Generator().manual_seed(1)
    for beam in args.beam:
        for batch in args.batch:
            ids = torch.randint(2, args.vocab - 1, (batch, args.source_length), generator=generator)
            ids[:, -1] = EOS_ID
            ids = ids.to(device)
            mask = torch.ones_like(ids)

            def run():
                synchronize(torch, device)
                start = time.perf_counter()
                with torch.inference_mode():
                    out = model.generate(input_ids=ids, attention_mask=mask, num_beams=beam, do_sample=False,
                                         min_new_tokens=args.target_length, max_new_tokens=args.target_length)
                synchronize(torch, device)
                seconds = time.perf_counter() - start
                # The decoder start id comes first; every sentence must have the forced length.
                if out.shape[1] - 1 != args.target_length:
                    sys.exit(f"bench_peers: error: HF generated {out.shape[1] - 1} tokens, not {args.target_length}")
                return seconds

            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            median, seconds = median_of(run, args.runs, args.warmup)
            peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
            points[(beam, batch)] = {"median_s": median, "runs_s": seconds,
                                     "generated_tokens_per_s": batch * args.target_length / median,
                                     "peak_memory_bytes": peak}
            log(f"HF beam {beam} batch {batch}: {1e3 * median:.1f} ms, "
                f"{points[(beam, batch)]['generated_tokens_per_s']:.0f} generated tokens/s")
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return points


def hf_real(args, torch, device, dtype, lines):
    import warnings
    from transformers import MarianMTModel, MarianTokenizer
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    tokenizer = MarianTokenizer.from_pretrained(args.hf_checkpoint)
    model = MarianMTModel.from_pretrained(args.hf_checkpoint).to(device=device, dtype=dtype).eval()
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id, model.config.decoder_start_token_id}

    # The output limit is max_new_tokens alone, as in seqtrans (--max-length); the checkpoint's other
    # generation settings (e.g. bad_words_ids for the pad id) stay.
    model.generation_config.max_length = None

    def translate(batch_lines):
        inputs = tokenizer(batch_lines, return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            out = model.generate(**inputs, num_beams=args.real_beam, do_sample=False,
                                 max_new_tokens=args.max_new_tokens)
        texts = tokenizer.batch_decode(out, skip_special_tokens=True)
        tokens = sum(1 for row in out.tolist() for token in row if token not in special)
        return texts, tokens

    def one_pass(subset):
        synchronize(torch, device)
        start = time.perf_counter()
        tokens = 0
        for first in range(0, len(subset), args.real_batch):
            tokens += translate(subset[first:first + args.real_batch])[1]
        synchronize(torch, device)
        return time.perf_counter() - start, tokens

    if args.hf_warmup_lines > 0:
        one_pass(lines[:args.hf_warmup_lines])
    passes = [one_pass(lines) for _ in range(args.real_runs)]
    median = statistics.median(seconds for seconds, _ in passes)
    tokens = passes[0][1]
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"median_s": median, "runs_s": [seconds for seconds, _ in passes], "sentences": len(lines),
            "target_tokens": tokens, "target_tokens_per_s": tokens / median, "sentences_per_s": len(lines) / median}


# --- report -----------------------------------------------------------------------------------------

def plot(args, synthetic_hf, synthetic_seqtrans, environment_info, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 4.5))
    # One colour per beam size; solid circles for seqtrans, dashed squares for Hugging Face.
    markers = {"seqtrans": "o", "Hugging Face": "s"}
    for index, beam in enumerate(args.beam):
        for engine, points in (("seqtrans", synthetic_seqtrans), ("Hugging Face", synthetic_hf)):
            xs = [batch for batch in args.batch if (beam, batch) in points]
            ys = [points[(beam, batch)]["generated_tokens_per_s"] for batch in xs]
            axes.plot(xs, ys, marker=markers[engine], linestyle="-" if engine == "seqtrans" else "--",
                      color=f"C{index}", label=f"{engine}, beam {beam}")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(args.batch)
    axes.set_xticklabels([str(batch) for batch in args.batch])
    axes.set_xlabel("batch size (sentences)")
    axes.set_ylabel("generated tokens / s")
    where = environment_info.get("gpu", "CPU")
    axes.set_title(f"Transformer {args.layers[0]}+{args.layers[1]} d{args.d_model}, {args.source_length}->"
                   f"{args.target_length} tokens, {args.dtype}, {where}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def ratio_table(args, synthetic_hf, synthetic_seqtrans, real):
    lines = []
    if synthetic_hf:
        lines.append(f"workload (b), synthetic {args.source_length}->{args.target_length}, generated tokens/s")
        lines.append(f"{'beam':>4} {'batch':>5} {'Hugging Face':>13} {'seqtrans':>10} {'ratio':>7} "
                     f"{'x of floor':>10}")
        for beam in args.beam:
            for batch in args.batch:
                hf = synthetic_hf[(beam, batch)]["generated_tokens_per_s"]
                ours = synthetic_seqtrans[(beam, batch)]
                floor = ours.get("x_of_floor")
                lines.append(f"{beam:>4} {batch:>5} {hf:>13.0f} {ours['generated_tokens_per_s']:>10.0f} "
                             f"{ours['generated_tokens_per_s'] / hf:>6.2f}x "
                             f"{(f'{floor:.1f}' if floor is not None else 'n/a'):>10}")
    if real:
        hf, ours = real["hugging_face"], real["seqtrans"]
        lines.append("")
        lines.append(f"workload (a), {real['sentences']} lines, beam {args.real_beam}, batches of {args.real_batch}, "
                     "tokenization included, target tokens/s")
        lines.append(f"  Hugging Face {hf['target_tokens_per_s']:.0f} ({hf['target_tokens']} tokens in "
                     f"{hf['median_s']:.2f} s)")
        lines.append(f"  seqtrans     {ours['target_tokens_per_s']:.0f} ({ours['target_tokens']} tokens in "
                     f"{ours['median_s']:.2f} s)")
        lines.append(f"  ratio        {ours['target_tokens_per_s'] / hf['target_tokens_per_s']:.2f}x (goal: 20x)")
    return "\n".join(lines)


def keyed(points):
    return [dict(beam=beam, batch=batch, **values) for (beam, batch), values in sorted(points.items())]


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch, device, dtype = torch_setup(args)
    environment_info = environment(args, torch)
    log(f"environment: {environment_info}")
    result = {"environment": environment_info, "arguments": vars(args)}

    synthetic_hf, synthetic_seqtrans = {}, {}
    if not args.skip_synthetic:
        # seqtrans first, in its own process, so that the GPU is free again when HF runs.
        synthetic_seqtrans, _ = seqtrans_synthetic(args)
        synthetic_hf = hf_synthetic(args, torch, device, dtype)
        result["synthetic"] = {"seqtrans": keyed(synthetic_seqtrans), "hugging_face": keyed(synthetic_hf)}

    real = None
    if args.input:
        with open(args.input, encoding="utf-8") as input_file:
            lines = [line.rstrip("\n") for line in input_file]
        if args.max_lines > 0:
            lines = lines[:args.max_lines]
        lines_path = os.path.join(args.out, "input.txt")
        with open(lines_path, "w", encoding="utf-8") as lines_file:
            lines_file.write("".join(line + "\n" for line in lines))
        ours, _ = seqtrans_real(args, lines_path)
        hf = hf_real(args, torch, device, dtype, lines)
        real = {"sentences": len(lines), "seqtrans": ours, "hugging_face": hf,
                "ratio_target_tokens_per_s": ours["target_tokens_per_s"] / hf["target_tokens_per_s"]}
        # Different output lengths would mean different decoding settings, not just different speed.
        if abs(ours["target_tokens"] - hf["target_tokens"]) > 0.05 * max(hf["target_tokens"], 1):
            log(f"warning: seqtrans generated {ours['target_tokens']} target tokens, HF {hf['target_tokens']}: "
                "check that both decode with the same settings")
        result["real"] = real

    table = ratio_table(args, synthetic_hf, synthetic_seqtrans, real)
    result["table"] = table
    with open(os.path.join(args.out, "bench_peers.json"), "w", encoding="utf-8") as json_file:
        json.dump(result, json_file, indent=2)
    if synthetic_hf:
        plot(args, synthetic_hf, synthetic_seqtrans, environment_info, os.path.join(args.out, "bench_peers.png"))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
