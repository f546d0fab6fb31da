#!/usr/bin/env python3
"""Hugging Face generate() in fp16 on the GPU for existing goldens: the fp16 reference of seqtrans's fp16.

Usage: make_fp16_goldens.py GOLDEN.tsv [GOLDEN.tsv ...]   (needs CUDA, torch and transformers)

For each fp32 golden file (test/data/golden/NAME_SET.tsv, made by make_golden.py, make_family_goldens.py or
make_llama_goldens.py) this loads the same checkpoint (test/data/MODEL) in float16 on the GPU, runs the same
generation config on the same source (or prompt) ids, one line at a time, and writes NAME_SET_fp16.tsv beside
it: the same columns, the settings line with dtype=float16 device=cuda. These are the like-for-like reference
for seqtrans's fp16 (test/data/golden/README.md). Golden sets with target prefixes are not supported.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import write_tsv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_golden(path):
    """(settings dict, settings line, rows of (text, ids)) of a golden TSV."""
    with open(path, encoding="utf-8") as tsv:
        header = tsv.readline()
        if not header.startswith("# "):
            raise ValueError(f"{path}: no settings line")
        line = header[2:].rstrip("\n")
        settings = dict(item.split("=", 1) for item in line.split(" ") if "=" in item)
        rows = []
        for row in tsv:
            if row.startswith("#") or not row.strip():
                continue
            fields = row.rstrip("\n").split("\t")
            rows.append((fields[0], [int(i) for i in fields[1].split()]))
    return settings, line, rows


def family_of(model):
    if model.startswith("llama_"):
        return "llama"
    if model.startswith("marian_"):
        return "marian"
    return "multilingual"


def load_model(family, checkpoint):
    import torch
    import transformers
    if family == "llama":
        cls = transformers.LlamaForCausalLM
    elif family == "marian":
        cls = transformers.MarianMTModel
    else:
        import make_family_goldens
        name = os.path.basename(checkpoint)
        cls = getattr(transformers, make_family_goldens.FAMILIES[name]["architecture"])
    return cls.from_pretrained(checkpoint, dtype=torch.float16, attn_implementation="eager").to("cuda").eval()


def generate_fp16(family, model, settings, ids):
    """(output ids, finished, score) as the golden's own builder records them."""
    beams = int(settings["num_beams"])
    if family == "llama":
        import make_llama_goldens
        output, finished, score, _, _ = make_llama_goldens.run_generate(
            model, ids, make_llama_goldens.generation_config(beams), "cuda")
        return output, finished, score
    if family == "marian":
        import make_golden
        if settings.get("target_prefixes", "none") != "none":
            raise ValueError("golden sets with target prefixes are not supported")
        extras = {}
        if float(settings.get("repetition_penalty", "1.0")) != 1.0:
            extras["repetition_penalty"] = float(settings["repetition_penalty"])
        if int(settings.get("no_repeat_ngram_size", "0")):
            extras["no_repeat_ngram_size"] = int(settings["no_repeat_ngram_size"])
        # Marian starts its decoder with the pad id, the id bad_words_ids suppresses.
        config = make_golden.generation_config(beams, int(settings["max_new_tokens"]), int(settings["decoder_start_id"]),
                                               int(settings["eos_id"]), settings["forced_eos_token_id"] != "None",
                                               extras)
        output, finished, score, _ = make_golden.run_generate(model, ids, config, "cuda")
        return output, finished, score
    import make_family_goldens
    config = make_family_goldens.generation_config(beams, int(settings["forced_bos_token_id"]))
    output, finished, score, _ = make_family_goldens.run_generate(model, ids, config, "cuda")
    return output, finished, score


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("goldens", nargs="+", help="fp32 golden TSV files")
    args = parser.parse_args()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    if not torch.cuda.is_available():
        sys.exit("make_fp16_goldens: error: needs a CUDA GPU (Hugging Face's fp16 runs there)")
    models = {}
    for path in args.goldens:
        settings, line, rows = read_golden(path)
        name = settings["model"]
        family = family_of(name)
        if name not in models:
            models[name] = load_model(family, os.path.join(REPO, "test", "data", name))
        results = []
        for text, ids in rows:
            output, finished, score = generate_fp16(family, models[name], settings, ids)
            results.append((text, ids, output, finished, score))
        line = line.replace("dtype=float32", "dtype=float16").replace("device=cpu", "device=cuda")
        out = path[:-len(".tsv")] + "_fp16.tsv"
        write_tsv(out, line, results)
        print(f"make_fp16_goldens: {out}: {len(results)} lines", flush=True)


if __name__ == "__main__":
    main()
