#!/usr/bin/env python3
"""Decoder-only generation speed of seqtrans and Hugging Face transformers generate() on the same GPU, in one run.

Usage:
  bench_generate_peers.py --seqtrans BUILD/seqtrans [--preset tinyllama-1.1b] [--points 1x128x128,64x512x128]

Workload: a random-weight LlamaForCausalLM of the preset's shape (tinyllama-1.1b: hidden 2048, 22 layers,
32 heads, 4 key/value heads, ffn 5632, vocabulary 32,000; llama2-7b: 4096, 32, 32, 32, 11008) in fp16;
each point BATCHxPROMPTxNEW is BATCH random prompts of PROMPT tokens (BOS first) and exactly NEW generated
tokens (HF: min_new_tokens = max_new_tokens; seqtrans: `bench --synthetic`, EOS suppressed until the
length). Greedy. Generated tokens/s = BATCH x NEW / median time of one call, prefill included; the time per
generated token at batch 1 is the median time / NEW. Prints a table of both engines and their ratio.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

SHAPES = {
    "tinyllama-1.1b": dict(hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                           intermediate_size=5632, vocab_size=32000),
    "llama2-7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                      intermediate_size=11008, vocab_size=32000),
}


def parse_points(text):
    points = []
    for item in text.split(","):
        batch, prompt, new = (int(x) for x in item.split("x"))
        points.append((batch, prompt, new))
    return points


def hf_seconds(model, batch, prompt, new, runs, warmup, torch):
    ids = torch.randint(3, 31999, (batch, prompt), device="cuda")
    ids[:, 0] = 1
    mask = torch.ones_like(ids)
    times = []
    for run in range(warmup + runs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                       num_beams=1, pad_token_id=0)
        torch.cuda.synchronize()
        if run >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def seqtrans_seconds(binary, preset, batch, prompt, new, runs, warmup):
    result = subprocess.run([binary, "bench", "--synthetic", "--device", "cuda", "--precision", "fp16", "--preset",
                             preset, "--batch", str(batch), "--beam", "1", "--source-length", str(prompt),
                             "--target-length", str(new), "--runs", str(runs), "--warmup", str(warmup)],
                            capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        sys.exit(f"seqtrans bench failed: {result.stderr.strip()}")
    for line in result.stdout.splitlines():
        cells = line.split()
        if len(cells) > 5 and cells[:4] == ["1", str(batch), str(prompt), str(new)]:
            return float(cells[4]) / 1e3
    sys.exit("seqtrans bench printed no row for the point:\n" + result.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqtrans", required=True)
    parser.add_argument("--preset", default="tinyllama-1.1b", choices=sorted(SHAPES))
    parser.add_argument("--points", type=parse_points, default=parse_points("1x128x128,64x512x128"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--skip-hf", action="store_true")
    args = parser.parse_args()

    rows = []
    model = None
    if not args.skip_hf:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
        torch.manual_seed(0)
        config = LlamaConfig(**SHAPES[args.preset], max_position_embeddings=2048, torch_dtype="float16")
        model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.float16).eval()
    for batch, prompt, new in args.points:
        ours = seqtrans_seconds(args.seqtrans, args.preset, batch, prompt, new, args.runs, args.warmup)
        theirs = None
        if model is not None:
            import torch
            with torch.inference_mode():
                theirs = hf_seconds(model, batch, prompt, new, args.runs, args.warmup, torch)
        rows.append(dict(batch=batch, prompt=prompt, new=new, seqtrans_s=ours, hf_s=theirs))
        print(f"{batch}x{prompt}x{new}: seqtrans {batch * new / ours:,.0f} tok/s ({1e3 * ours / new:.2f} ms/token)"
              + (f", HF {batch * new / theirs:,.0f} tok/s ({1e3 * theirs / new:.2f} ms/token), "
                 f"{theirs / ours:.1f}x" if theirs else ""), flush=True)
    print(json.dumps(dict(preset=args.preset, rows=rows)))


if __name__ == "__main__":
    main()
