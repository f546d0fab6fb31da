#!/usr/bin/env python3
"""Makes the tiny MarianMT test model and the Hugging Face golden outputs for seqtrans' e2e tests.

Usage: make_golden.py OUT_DIR [--data DIR] [--device auto|cpu|cuda] [--checkpoint DIR]

Writes OUT_DIR/marian_tiny/ (an HF checkpoint that MarianTokenizer and MarianMTModel load) and
OUT_DIR/golden/{marian_tiny_greedy.tsv, marian_tiny_beam4.tsv, README.md}. With --checkpoint, an
existing checkpoint is reused (copied) instead of creating a new model.

The model is a small Marian (post-norm, swish, sinusoids, shared + tied embeddings) trained for a
few thousand steps on Multi30k and newstest (a randomly initialised one ends at the first step or
never), with a random output bias and a sharpened last layer norm so that top choices are rarely
near-ties. Everything is seeded; the checkpoint is committed, so rerun with --checkpoint to keep it.

TSV lines: source_text, source_ids (EOS included), output_ids (decoder start and EOS excluded),
finished (1 if EOS ended the output), score (%.6f). See the README written next to them.
"""
import argparse
import io
import json
import os
import platform
import random
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Model shape: small enough for a ~3 MB checkpoint, with 4 heads of 32 channels.
TINY_CONFIG = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                   max_position_embeddings=256, activation_function="swish", scale_embedding=True,
                   share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
SPM_VOCAB_SIZE = 1000
MAX_SOURCE_IDS = 240
# A randomly initialised decoder falls into a stationary loop (EOS wins at the first step or never,
# whatever the weight spread), so the model is trained briefly: its outputs then end at lengths that
# follow the source. The output bias is a fixed random draw (exercising that path), and the last
# layer norm is scaled by SHARPEN afterwards (logits times SHARPEN) to keep top choices apart.
TRAIN_STEPS = 2500
TRAIN_MAX_TOKENS = 6000
TRAIN_LR = 1.5e-3
TRAIN_WARMUP = 200
LOGITS_BIAS_STD = 0.3
SHARPEN = 2.0
NEAR_TIE = 1e-3           # greedy steps whose top-2 logit gap is below this are listed in the README


def default_data_dir():
    for candidate in (os.path.join(REPO, "..", "shared", "data"), os.path.join(REPO, ".data")):
        if os.path.isdir(os.path.join(candidate, "wmt-newstest-en-de")):
            return os.path.normpath(candidate)
    return os.path.join(REPO, ".data")


def read_lines(data_dir, relative):
    path = os.path.join(data_dir, relative)
    if not os.path.isfile(path):
        sys.exit(f"make_golden: error: {path}: file not found (pass --data DIR)")
    with open(path, encoding="utf-8") as text_file:
        return [line.rstrip("\n") for line in text_file]


def clean(text):
    return " ".join(text.replace("\t", " ").replace("\r", " ").replace("\n", " ").split())


# --- the checkpoint -------------------------------------------------------------------------------

def spm_lines(data_dir):
    return (read_lines(data_dir, "multi30k/train.en")[:2000] + read_lines(data_dir, "multi30k/train.de")[:2000]
            + read_lines(data_dir, "wmt-newstest-en-de/newstest2013.en")[:1500]
            + read_lines(data_dir, "wmt-newstest-en-de/newstest2013.de")[:1500])


def train_spm(data_dir, seed):
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    # Default SentencePiece ids (<unk>=0, <s>=1, </s>=2) differ from the model ids in vocab.json,
    # as in OPUS-MT, so the piece -> id mapping is exercised by the tests. No normalisation rule
    # keeps the .spm files small (the NFKC table alone is 240 kB; the demo model has it).
    spm.SentencePieceTrainer.train(sentence_iterator=iter(spm_lines(data_dir)), model_writer=model,
                                   model_type="unigram", vocab_size=SPM_VOCAB_SIZE, character_coverage=1.0,
                                   normalization_rule_name="identity", num_threads=1, minloglevel=2)
    return model.getvalue()


def train_briefly(model, vocab, data_dir, seed, steps, device):
    """A few thousand AdamW steps on Multi30k train and newstest2012/2013 (fp32, seeded)."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from train_demo import PairSet
    sources, targets = [], []
    for stem in ("multi30k/train", "wmt-newstest-en-de/newstest2012", "wmt-newstest-en-de/newstest2013"):
        sources += read_lines(data_dir, f"{stem}.en")
        targets += read_lines(data_dir, f"{stem}.de")
    sources, targets = vocab.encode(sources), vocab.encode(targets)
    keep = [i for i in range(len(sources)) if len(sources[i]) <= 150 and len(targets[i]) <= 150]
    pairs = PairSet([sources[i] for i in keep], [targets[i] for i in keep], vocab.pad_id, device)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR, betas=(0.9, 0.98), weight_decay=0.01)
    batches = []
    started = time.time()
    model.train()
    for step in range(steps):
        if not batches:
            batches = pairs.batches(np.arange(len(pairs)), TRAIN_MAX_TOKENS, rng)
        batch = batches.pop()
        for group in optimizer.param_groups:
            group["lr"] = TRAIN_LR * min(1.0, (step + 1) / TRAIN_WARMUP) * (1.0 - step / steps)
        source, mask, decoder_input, labels = pairs.tensors(batch, vocab.pad_id, vocab.pad_id)
        logits = model(input_ids=source, attention_mask=mask, decoder_input_ids=decoder_input).logits
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100,
                               label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"make_golden: training step {step} loss {loss.item():.3f} ({time.time() - started:.0f}s)",
                  flush=True)
    model.eval()


def generation_defaults(pad_id, eos_id):
    from transformers import GenerationConfig
    return GenerationConfig(decoder_start_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id,
                            bad_words_ids=[[pad_id]], forced_eos_token_id=None, max_length=256)


def create_checkpoint(directory, data_dir, seed, steps, device):
    import torch
    from transformers import MarianConfig, MarianMTModel
    from train_demo import Vocabulary
    torch.manual_seed(seed)
    spm_bytes = train_spm(data_dir, seed)
    vocab = Vocabulary(spm_bytes)
    config = MarianConfig(vocab_size=len(vocab), decoder_vocab_size=len(vocab), pad_token_id=vocab.pad_id,
                          eos_token_id=vocab.eos_id, decoder_start_token_id=vocab.pad_id, forced_eos_token_id=None,
                          bos_token_id=None, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
                          **TINY_CONFIG)
    model = MarianMTModel(config).to(device)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed)
        model.final_logits_bias.copy_(LOGITS_BIAS_STD * torch.randn(model.final_logits_bias.shape,
                                                                    generator=generator).to(device))
    train_briefly(model, vocab, data_dir, seed, steps, device)
    model = model.cpu()
    with torch.no_grad():
        last_norm = model.model.decoder.layers[-1].final_layer_norm
        last_norm.weight.mul_(SHARPEN)
        last_norm.bias.mul_(SHARPEN)
    model.generation_config = generation_defaults(vocab.pad_id, vocab.eos_id)
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory)
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(directory, name), "wb") as spm_file:
            spm_file.write(spm_bytes)
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as vocab_file:
        json.dump(vocab.ids, vocab_file, ensure_ascii=False, indent=0)
    tokenizer_config = {"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
                        "separate_vocabs": False, "unk_token": "<unk>", "eos_token": "</s>",
                        "pad_token": "<pad>", "model_max_length": 512}
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as config_file:
        json.dump(tokenizer_config, config_file, indent=2)


# --- the inputs -----------------------------------------------------------------------------------

SPECIAL_INPUTS = [
    "",                                               # an empty line: the source is EOS alone
    "a",
    "I",
    "Hi",
    "the dog",
    ".",
    "Hello",
    "Yes.",
    "Thank you!",
    "Das ist ein Test: Привет, 世界! ☃",             # characters outside the vocabulary -> <unk>
    "ﬁnal ＡＢＣ café naïve Ångström",                # NFKC normalisation in SentencePiece
    "The the the the the the the the the the the the.",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10; 3.14159 -- 42 % of $ 1,000,000?",
    "WHY IS EVERYTHING IN CAPITAL LETTERS?",
    "  leading and   inner   spaces  ",
    "\"Quoted,\" she said - (in brackets) [and more] {braces} <angles> & ampersands / slashes.",
]


def select_inputs(data_dir, tokenizer, seed):
    """About 360 source lines with 1 to ~230 ids, shuffled: short lines, one sentence of every length
    up to 80 ids (up to four each), concatenations for longer ones, and a few special cases."""
    rng = random.Random(seed)
    count = lambda text: len(tokenizer(text)["input_ids"])
    news = [clean(line) for line in read_lines(data_dir, "wmt-newstest-en-de/newstest2014.en")]
    flickr = [clean(line) for line in read_lines(data_dir, "multi30k/test_2016_flickr.en")]
    tatoeba = [clean(line) for line in read_lines(data_dir, "tatoeba-manythings-en-de/tatoeba.en")[:400]]

    chosen = [clean(text) for text in SPECIAL_INPUTS]
    seen = set(chosen)
    by_length = {}
    for text in tatoeba + flickr + news:
        if text and text not in seen:
            by_length.setdefault(count(text), []).append(text)
    for length in range(2, 81):
        candidates = by_length.get(length, [])
        rng.shuffle(candidates)
        take = 4 if length >= 4 else 2
        for text in candidates[:take]:
            chosen.append(text)
            seen.add(text)
    # Long inputs: concatenations of consecutive newstest sentences, one per 3-id bucket up to ~200.
    target_lengths = list(range(81, 201, 3))
    start = 0
    for target in target_lengths:
        text = ""
        while start < len(news) and count(text) < target:
            text = (text + " " + news[start]).strip()
            start += 1
        if MAX_SOURCE_IDS >= count(text) > 80 and text not in seen:
            chosen.append(text)
            seen.add(text)
    rng.shuffle(chosen)
    return chosen


# --- running generate() ---------------------------------------------------------------------------

def generation_config(num_beams, max_new_tokens, pad_id, eos_id):
    from transformers import GenerationConfig
    return GenerationConfig(num_beams=num_beams, do_sample=False, num_return_sequences=1,
                            length_penalty=1.0, early_stopping=False, max_new_tokens=max_new_tokens,
                            min_length=0, min_new_tokens=None, bad_words_ids=[[pad_id]],
                            forced_bos_token_id=None, forced_eos_token_id=None, repetition_penalty=1.0,
                            no_repeat_ngram_size=0, encoder_no_repeat_ngram_size=0, renormalize_logits=False,
                            decoder_start_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id,
                            bos_token_id=None, output_scores=True, output_logits=True,
                            return_dict_in_generate=True, use_cache=True)


def run_generate(model, source_ids, config, device):
    """Returns (output ids without start/EOS/pad, finished, score, min top-2 logit gap for greedy)."""
    import torch
    pad_id, eos_id = config.pad_token_id, config.eos_token_id
    inputs = torch.tensor([source_ids], device=device)
    with torch.no_grad():
        result = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), generation_config=config)
    sequence = result.sequences[0].tolist()
    if sequence[0] != pad_id:
        raise RuntimeError(f"generate() did not start with the decoder start id: {sequence[:3]}")
    sequence = sequence[1:]
    while sequence and sequence[-1] == pad_id:
        sequence.pop()
    if pad_id in sequence:
        raise RuntimeError("generate() produced the suppressed pad id")
    finished = bool(sequence) and sequence[-1] == eos_id
    gap = float("inf")
    if config.num_beams == 1:
        # HF beam search takes log_softmax over the raw logits (pad included) before masking pad;
        # the greedy score is defined the same way so both files mean the same thing.
        logits = torch.stack([step[0] for step in result.logits]).float()   # [steps, vocab]
        if logits.shape[0] != len(sequence):
            raise RuntimeError(f"greedy: {logits.shape[0]} logits for {len(sequence)} tokens")
        chosen = torch.tensor(sequence, device=logits.device)
        steps = torch.arange(len(sequence), device=logits.device)
        score = float(torch.log_softmax(logits, dim=-1)[steps, chosen].double().sum())
        logits[:, pad_id] = float("-inf")
        top = torch.topk(logits, 2, dim=-1).values
        gap = float((top[:, 0] - top[:, 1]).min())
    else:
        score = float(result.sequences_scores[0])
    if finished:
        sequence = sequence[:-1]
    return sequence, finished, score, gap


def write_tsv(path, comment, rows):
    with open(path, "w", encoding="utf-8") as tsv:
        tsv.write(f"# {comment}\n")
        for text, source_ids, output_ids, finished, score in rows:
            tsv.write(f"{text}\t{' '.join(map(str, source_ids))}\t{' '.join(map(str, output_ids))}\t"
                      f"{int(finished)}\t{score:.6f}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="writes OUT_DIR/marian_tiny and OUT_DIR/golden")
    parser.add_argument("--data", default=default_data_dir(), help="data directory (multi30k/, wmt-newstest-en-de/, "
                        "tatoeba-manythings-en-de/)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--checkpoint", help="reuse this marian_tiny checkpoint instead of creating one")
    parser.add_argument("--max-new-tokens", type=int, default=80)
    parser.add_argument("--train-steps", type=int, default=TRAIN_STEPS, help="training steps of the tiny model")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N inputs (quick checks)")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import MarianMTModel, MarianTokenizer
    transformers.logging.set_verbosity_error()
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    device = "cpu" if device == "auto" else device
    # Full fp32 matrix products: TF32 would make the reference less exact.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    checkpoint = os.path.join(args.out_dir, "marian_tiny")
    golden = os.path.join(args.out_dir, "golden")
    os.makedirs(golden, exist_ok=True)
    started = time.time()
    if args.checkpoint:
        if os.path.abspath(args.checkpoint) != os.path.abspath(checkpoint):
            shutil.copytree(args.checkpoint, checkpoint, dirs_exist_ok=True)
    else:
        create_checkpoint(checkpoint, args.data, args.seed, args.train_steps, device)
    tokenizer = MarianTokenizer.from_pretrained(checkpoint)
    model = MarianMTModel.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    pad_id, eos_id = model.config.pad_token_id, model.config.eos_token_id
    inputs = select_inputs(args.data, tokenizer, args.seed)
    if args.limit:
        inputs = inputs[:args.limit]
    source_ids = [tokenizer(text)["input_ids"] for text in inputs]
    print(f"make_golden: {len(inputs)} inputs, source lengths {min(map(len, source_ids))}.."
          f"{max(map(len, source_ids))} ids, device {device}, checkpoint ready in {time.time() - started:.1f}s",
          flush=True)

    settings = {}
    summaries = {}
    near_ties = []
    for label, num_beams in (("greedy", 1), ("beam4", 4)):
        config = generation_config(num_beams, args.max_new_tokens, pad_id, eos_id)
        model.generation_config = config
        step_started = time.time()
        rows = []
        min_gap = float("inf")
        for line_number, (text, ids) in enumerate(zip(inputs, source_ids), start=2):
            output, finished, score, gap = run_generate(model, ids, config, device)
            rows.append((text, ids, output, finished, score))
            min_gap = min(min_gap, gap)
            if gap < NEAR_TIE:
                near_ties.append((line_number, gap))
        settings[label] = (f"model=marian_tiny num_beams={num_beams} do_sample=False length_penalty=1.0 "
                           f"early_stopping=False num_return_sequences=1 max_new_tokens={args.max_new_tokens} "
                           f"bad_words_ids=[[{pad_id}]] forced_eos_token_id=None min_length=0 "
                           f"repetition_penalty=1.0 no_repeat_ngram_size=0 decoder_start_id={pad_id} "
                           f"eos_id={eos_id} batch_size=1 dtype=float32 device={device} "
                           f"score={'sequences_scores' if num_beams > 1 else 'sum(log_softmax(raw logits))'} "
                           f"columns=source_text,source_ids,output_ids,finished,score")
        write_tsv(os.path.join(golden, f"marian_tiny_{label}.tsv"), settings[label], rows)
        lengths = sorted(len(row[2]) for row in rows)
        summaries[label] = dict(seconds=time.time() - step_started, finished=sum(row[3] for row in rows),
                                total=len(rows), min_len=lengths[0], median_len=lengths[len(lengths) // 2],
                                max_len=lengths[-1], min_gap=min_gap)
        print(f"make_golden: {label}: {summaries[label]}", flush=True)

    write_readme(golden, args, device, inputs, source_ids, summaries, near_ties)
    print(f"make_golden: done in {time.time() - started:.1f}s", flush=True)


def write_readme(golden, args, device, inputs, source_ids, summaries, near_ties):
    import torch
    import transformers
    import sentencepiece
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else (platform.processor() or "cpu")
    lengths = sorted(map(len, source_ids))
    lines = [
        "# Golden outputs of Hugging Face transformers for the tiny Marian model",
        "",
        f"Made by `scripts/make_golden.py` (seed {args.seed}) with transformers {transformers.__version__}, "
        f"torch {torch.__version__}, sentencepiece {sentencepiece.__version__}, Python {platform.python_version()}, "
        f"on {device} ({device_name}), {time.strftime('%Y-%m-%d')}.",
        "",
        "## The model: `test/data/marian_tiny/`",
        "",
        "A small `MarianMTModel` saved with `save_pretrained` (safetensors) plus `source.spm`, "
        "`target.spm` (one joint SentencePiece unigram model, "
        f"{SPM_VOCAB_SIZE} pieces, identity normalisation, trained on 7,000 lines of Multi30k train and "
        "newstest2013, English and German) and an OPUS-MT-style `vocab.json` (`</s>` = 0, `<unk>` = 1, the "
        "other pieces in SentencePiece order, `<pad>` last; SentencePiece's own ids differ). Shape: "
        + ", ".join(f"{key}={value}" for key, value in TINY_CONFIG.items()) + ". "
        f"Weights: HF's initialisation, a fixed random `final_logits_bias` N(0, {LOGITS_BIAS_STD}), then "
        f"{args.train_steps} AdamW steps (lr {TRAIN_LR}, {TRAIN_MAX_TOKENS}-token batches, label smoothing 0.1) "
        "on Multi30k train + newstest2012/2013 (a randomly initialised decoder falls into a loop: EOS comes at "
        "the first step or never), then the last decoder layer norm's gamma and beta multiplied by "
        f"{SHARPEN} (logits x {SHARPEN}) so that the best token is rarely a near-tie. The translations are "
        "poor; only the exact computation matters. Convert it with "
        "`scripts/convert_marian.py test/data/marian_tiny OUT.seqtrans --dtype fp32`.",
        "",
        "## The files",
        "",
        "`marian_tiny_greedy.tsv` and `marian_tiny_beam4.tsv`: the first line is a `#` comment with the settings, "
        "then one line per input, tab-separated:",
        "",
        "1. source text (tabs and newlines replaced by spaces, runs of spaces collapsed)",
        "2. source ids from `MarianTokenizer`, space-separated, EOS (0) included",
        "3. output ids, space-separated, without the decoder start id (pad) and without EOS; may be empty",
        "4. finished: 1 if EOS ended the output, 0 if it stopped at max_new_tokens",
        "5. score, `%.6f`",
        "",
        f"Inputs: {len(inputs)} lines (newstest2014.en, Multi30k test_2016_flickr.en, short Tatoeba lines, "
        "concatenated newstest lines for long inputs, and a few special cases: an empty line (its TSV line starts "
        "with a tab; the source is EOS alone), one- and two-piece lines, characters outside the vocabulary (<unk>), "
        "characters that NFKC would change (this model's SentencePiece does not normalise), repeats, digits, "
        "extra spaces), {lengths[0]} to {lengths[-1]} source ids "
        f"(median {lengths[len(lengths) // 2]}), in shuffled order.",
        "",
        "## How generate() was called",
        "",
        "One input at a time (batch size 1, no padding), fp32, eager attention, TF32 off, `use_cache=True`, "
        f"`max_new_tokens={args.max_new_tokens}`, `bad_words_ids=[[pad]]`, no forced EOS, no minimum length, "
        "no repetition penalties, `output_scores=True, output_logits=True, return_dict_in_generate=True`.",
        "",
        "- greedy: `num_beams=1, do_sample=False`. Score = sum over the generated tokens (EOS included when "
        "generated) of `log_softmax(raw logits)[token]`, the log-softmax over the full vocabulary with pad "
        "included (pad is only masked when choosing the token), like HF beam search computes its scores.",
        "- beam4: `num_beams=4, length_penalty=1.0, early_stopping=False, num_return_sequences=1`. Score = "
        "`sequences_scores`: the sum of log-probabilities (log_softmax over raw logits, then pad masked to -inf) "
        "divided by the number of generated tokens, EOS included (`(cur_len + 1 - 1) ** length_penalty`).",
        "",
        "What seqtrans must mirror to match HF beam search exactly:",
        "- each step takes the top 2 * num_beams = 8 candidates (accumulated log-probability) over beam x vocab; "
        "candidates ending in EOS that rank among the first num_beams of the 8 are offered to the finished list "
        "(scored with the length normalisation above; the list keeps the best num_beams), EOS candidates ranked "
        "lower are dropped, and the best num_beams candidates not ending in EOS continue;",
        "- early_stopping=False heuristic, checked after each step: once num_beams hypotheses are finished and "
        "the best running beam's accumulated score divided by its length (tokens generated so far) is not greater "
        "than the worst finished score, the search stops (no further hypotheses are added);",
        "- at max_new_tokens every running beam counts as finished (with its length, no EOS), so an output "
        "can end without EOS (finished = 0);",
        "- the output is the best finished hypothesis.",
        "",
        "## Summary",
        "",
        "| mode | finished with EOS | output length min / median / max | smallest top-2 logit gap (greedy) | time |",
        "|---|---|---|---|---|",
    ]
    for label, summary in summaries.items():
        gap = f"{summary['min_gap']:.4f}" if summary["min_gap"] != float("inf") else "-"
        lines.append(f"| {label} | {summary['finished']} of {summary['total']} | {summary['min_len']} / "
                     f"{summary['median_len']} / {summary['max_len']} | {gap} | {summary['seconds']:.0f} s |")
    ties = ", ".join(f"{line} ({gap:.1e})" for line, gap in near_ties) or "none"
    lines += ["", f"Near-ties: greedy lines (file line numbers, the `#` line is line 1) where some step's best and "
              f"second-best logits differ by less than {NEAR_TIE:g}, with that gap: {ties}. Another fp32 "
              "implementation may legitimately pick the other token there; beam lines of the same inputs may be "
              "just as sensitive."]
    lines += ["", "Regenerate: `python3 scripts/make_golden.py test/data --data ../shared/data` "
              "(add `--checkpoint test/data/marian_tiny` to keep the model and only rerun generate()).", ""]
    with open(os.path.join(golden, "README.md"), "w", encoding="utf-8") as readme:
        readme.write("\n".join(lines))


if __name__ == "__main__":
    main()
