#!/usr/bin/env python3
"""Hugging Face generate() goldens with repetition controls for a decoder-only model.

For a decoder-only model Hugging Face's repetition_penalty and no_repeat_ngram_size read input_ids, the prompt
included; these goldens check that seqtrans does the same. The first 20 sources of the tiny Llama checkpoint's
greedy goldens (scripts/make_llama_goldens.py), prompted as there, greedy with repetition_penalty 1.3 and
no_repeat_ngram_size 3, beam 4 with 1.3 and 2, 40 new tokens, fp32 on the CPU. Needs torch and transformers.

Usage: scripts/make_llama_repetition_goldens.py [--model llama_tiny_gqa2] [--lines 20]
"""
import argparse
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaForCausalLM

DATA = Path(__file__).resolve().parent.parent / "test" / "data"
SETTINGS = [("greedy", 1, 1.3, 3), ("beam4", 4, 1.3, 2)]


def sources(model, lines):
    rows = (DATA / "golden" / f"{model}_greedy.tsv").read_text().splitlines()[1:]
    return [row.split("\t")[0] for row in rows[:lines]]


def settings_line(model, beams, penalty, ngram):
    return (f"# model={model} num_beams={beams} do_sample=False length_penalty=1.0 early_stopping=False "
            f"num_return_sequences=1 max_new_tokens=40 bad_words_ids=None forced_eos_token_id=None min_length=0 "
            f"repetition_penalty={penalty} no_repeat_ngram_size={ngram} target_prefixes=none "
            f"prompt_template=English:%20{{source}}%0AGerman: bos_id=1 eos_id=2 pad_id=2 add_bos=True batch_size=1 "
            f"dtype=float32 device=cpu score=none columns=source_text,prompt_ids,output_ids,finished,score\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama_tiny_gqa2")
    parser.add_argument("--lines", type=int, default=20)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(DATA / args.model)
    model = LlamaForCausalLM.from_pretrained(DATA / args.model, dtype=torch.float32).eval()
    for name, beams, penalty, ngram in SETTINGS:
        path = DATA / "golden" / f"{args.model}_repetition_{name}.tsv"
        with open(path, "w") as out:
            out.write(settings_line(args.model, beams, penalty, ngram))
            for source in sources(args.model, args.lines):
                ids = tokenizer(f"English: {source}\nGerman:", return_tensors="pt").input_ids
                generated = model.generate(ids, max_new_tokens=40, max_length=None, do_sample=False, num_beams=beams,
                                           repetition_penalty=penalty, no_repeat_ngram_size=ngram, eos_token_id=2,
                                           pad_token_id=2)[0, ids.shape[1]:].tolist()
                finished = bool(generated) and generated[-1] == 2
                output = generated[:-1] if finished else generated
                out.write("\t".join([source, " ".join(map(str, ids[0].tolist())), " ".join(map(str, output)),
                                     "1" if finished else "0", "nan"]) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
