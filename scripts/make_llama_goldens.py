#!/usr/bin/env python3
"""Makes tiny LlamaForCausalLM test checkpoints, their converted seqtrans files and Hugging Face goldens.

Usage: make_llama_goldens.py OUT_DIR [--models NAME,...] [--data DIR] [--steps N] [--lines N] [--reuse]
                             [--device auto|cpu|cuda]

For each model writes OUT_DIR/NAME/ laid out as the hub ships a Llama checkpoint (config.json,
generation_config.json, model.safetensors, tokenizer.model, tokenizer.json, tokenizer_config.json),
OUT_DIR/NAME.seqtrans (scripts/convert_hf.py, fp32) and OUT_DIR/golden/NAME_{greedy,beam4}.tsv and NAME.md:
HF generate() on prompts "English: {source}\\nGerman:", in the TSV format of test/data/golden/README.md (the
settings line records the prompt template, percent-encoded). Also writes OUT_DIR/golden/llama_tokenizer.tsv:
what HF's LlamaTokenizer makes of a few dozen texts (ids, for each Metaspace prefix scheme) and of id
sequences (decoded text), for the C++ tokenizer's unit test. With --reuse the existing checkpoints are kept.

The SentencePiece model is trained as Llama's was (BPE, byte fallback, identity normalization, dummy prefix,
spaces kept, digits split) on Multi30k train, English and German; every model shares it. Each model is
trained briefly (seeded AdamW steps on CPU or GPU) as an English -> German translator on "English: {src}\\n
German: {tgt}</s>", the loss on the German tokens and </s> only, then its final norm is multiplied by 2 (logits
x 2: fewer near-ties). The models vary what a Llama config can vary: grouped-query ratios 1, 2 and 4,
rope_theta 10000 and 500000, tied and untied output, head_dim != hidden/heads with attention and MLP biases,
and the legacy (prepend "always") tokenizer. Runs on the CPU; --device cuda trains and generates on a GPU.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.parse

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import at_limit, default_data_dir, read_lines, write_tsv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM_VOCAB_SIZE = 1000
SPM_TRAIN_LINES = 10000    # per language, from Multi30k train
UNK, BOS, EOS = 0, 1, 2    # Llama's ids
SHAPE = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=256, rms_norm_eps=1e-5, hidden_act="silu")
MODELS = {
    "llama_tiny_mha": dict(num_key_value_heads=4, rope_theta=10000.0, tie_word_embeddings=False),
    "llama_tiny_gqa2": dict(num_key_value_heads=2, rope_theta=500000.0, tie_word_embeddings=True,
                            generation=dict(pad_token_id=UNK, max_length=256)),
    "llama_tiny_gqa4": dict(num_key_value_heads=1, rope_theta=10000.0, tie_word_embeddings=True),
    "llama_tiny_bias": dict(num_key_value_heads=2, rope_theta=500000.0, tie_word_embeddings=False, head_dim=32,
                            attention_bias=True, mlp_bias=True, legacy_tokenizer=True),
}
PROMPT = "English: {source}\nGerman:"
GOLDEN_SETS = [("greedy", 1), ("beam4", 4)]
MAX_NEW_TOKENS = 64
TRAIN_BATCH = 48           # sequences per step
TRAIN_LR = 3e-3
TRAIN_WARMUP = 50
SHARPEN = 2.0
NEAR_TIE = 1e-3
# Golden sources beyond Multi30k's test lines: non-ASCII, emoji (byte fallback), spacing, an empty source.
EXTRA_SOURCES = ["A man in a café in Zürich drinks coffee.", "A dog 🐕 runs on the beach 🌊.",
                 "Two  men   stand near a  car.", "", "Über 100 Kinder spielen.", "中文 and кошка in one line."]
# Tokenizer cases: spacing, specials as text, non-ASCII, emoji, no normalization (ligature, fullwidth).
TOKENIZER_TEXTS = [
    "", " ", "   ", "Hello world", " leading space", "  two leading spaces", "trailing space ", "trailing two  ",
    "multiple   inner    spaces", "\ttab first", "tab\tinside", "new\nline", "English: A man.\nGerman:",
    "Zürich, Straße, Übermut, Café", "Emoji 😀 and a dog 🐕 and 👩‍👩‍👧 (a ZWJ sequence)", "中文 кошка ελληνικά",
    "Ein Mann fährt Fahrrad.", "<s> start special", "a<s>b", "x </s> y", "<unk>", "<unk> x", "</s></s>",
    "▁already marked", " ▁", "1234567890", "ﬁ ligature and fullwidth ＡＢＣ", "non\u00a0breaking space",
    "\u3000ideographic space", "control \x01 chars \x7f", "replacement \ufffd character", "x" * 120,
    "Numbers 3.14, 1,000 and 42%", "URL https://example.com/a?b=c&d=e", "NUL\x00inside", "a\x00 b",
]
TOKENIZER_SCHEMES = {"first": dict(legacy=False), "always": dict(legacy=True),
                     "never": dict(legacy=False, add_prefix_space=False)}


def log(message):
    print(f"make_llama_goldens: {message}", flush=True)


# --- the tokenizer --------------------------------------------------------------------------------

def train_spm(data_dir, seed):
    """The goldens' SentencePiece model: SPM_TRAIN_LINES lines of each language of Multi30k train."""
    lines = []
    for language in ("en", "de"):
        lines += read_lines(data_dir, f"multi30k/train.{language}")[:SPM_TRAIN_LINES]
    return train_llama_spm(lines, SPM_VOCAB_SIZE, seed)


def train_llama_spm(lines, vocab_size, seed):
    """A SentencePiece model set up as Llama's tokenizer.model is. One thread: BPE merges come out differently
    with more, and the models must be reproducible."""
    import io
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=vocab_size,
        byte_fallback=True, normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        split_digits=True, allow_whitespace_only_pieces=True, character_coverage=0.9995, unk_id=UNK, bos_id=BOS,
        eos_id=EOS, pad_id=-1, num_threads=1, minloglevel=2)
    return model.getvalue()


def hub_style_tokenizer_json(path):
    """Rewrites tokenizer.json as Llama-2's and TinyLlama's hub files have it (a Prepend + Replace normalizer, no
    pre-tokenizer): transformers 5 ignores both, which the converter relies on."""
    with open(path, encoding="utf-8") as json_file:
        document = json.load(json_file)
    document["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    document["pre_tokenizer"] = None
    with open(path, "w", encoding="utf-8") as json_file:
        json.dump(document, json_file, ensure_ascii=False, indent=2)


def set_legacy(path, legacy):
    """Records legacy in tokenizer_config.json as the hub's Llama-2 and TinyLlama files do (save_pretrained
    leaves it out, and it decides the prefix scheme)."""
    with open(path, encoding="utf-8") as json_file:
        settings = json.load(json_file)
    settings["legacy"] = legacy
    with open(path, "w", encoding="utf-8") as json_file:
        json.dump(settings, json_file, ensure_ascii=False, indent=2)


def build_tokenizer(directory, spm_bytes, legacy):
    """Writes tokenizer.model, tokenizer.json (BOS first) and tokenizer_config.json; returns the loaded tokenizer."""
    from transformers import LlamaTokenizer
    with open(os.path.join(directory, "tokenizer.model"), "wb") as spm_file:
        spm_file.write(spm_bytes)
    tokenizer = LlamaTokenizer.from_pretrained(directory, legacy=legacy)
    tokenizer.add_bos_token = True   # rebuilds the post-processor: "<s> $A", as the hub's files have it
    tokenizer.save_pretrained(directory)
    set_legacy(os.path.join(directory, "tokenizer_config.json"), legacy)
    if legacy:
        hub_style_tokenizer_json(os.path.join(directory, "tokenizer.json"))
    return LlamaTokenizer.from_pretrained(directory)


# --- the model ------------------------------------------------------------------------------------

def build_model(spec, vocab_size, seed, shape=SHAPE):
    import torch
    import transformers
    torch.manual_seed(seed)
    settings = {key: value for key, value in spec.items() if key not in ("rope_theta", "generation", "legacy_tokenizer")}
    config = transformers.LlamaConfig(vocab_size=vocab_size, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=None,
                                      rope_parameters={"rope_type": "default", "rope_theta": spec["rope_theta"]},
                                      attention_dropout=0.0, **shape, **settings)
    return transformers.LlamaForCausalLM(config)


def training_sequences(tokenizer, data_dir):
    """prompted_sequences of the Multi30k train pairs."""
    english = read_lines(data_dir, "multi30k/train.en")
    german = read_lines(data_dir, "multi30k/train.de")
    return prompted_sequences(tokenizer, english, german, SHAPE["max_position_embeddings"])


def prompted_sequences(tokenizer, english, german, max_ids):
    """(ids, first loss position) of "English: {src}\\nGerman: {tgt}</s>" for each pair: BOS, the prompt, the
    German tokens and EOS; the loss covers the German tokens and EOS. Pairs whose prompt's ids are not a prefix
    of the whole text's, or with more than max_ids ids, are left out."""
    prompts = tokenizer([PROMPT.format(source=text) for text in english])["input_ids"]
    full = tokenizer([PROMPT.format(source=source) + " " + target for source, target in zip(english, german)])
    sequences = []
    for prompt, ids in zip(prompts, full["input_ids"]):
        if ids[:len(prompt)] == prompt and len(ids) + 1 <= max_ids:
            sequences.append((ids + [EOS], len(prompt)))
    return sequences


def train_briefly(model, tokenizer, data_dir, seed, steps, device):
    """AdamW steps on random batches, the loss on the German side only (seeded)."""
    import torch
    import torch.nn.functional as F
    sequences = training_sequences(tokenizer, data_dir)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TRAIN_LR, betas=(0.9, 0.98), weight_decay=0.01)
    model.to(device).train()
    started = time.time()
    for step in range(steps):
        batch = [sequences[i] for i in rng.choice(len(sequences), TRAIN_BATCH, replace=False)]
        width = max(len(ids) for ids, _ in batch)
        inputs = torch.full((len(batch), width), EOS, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        for row, (ids, first) in enumerate(batch):
            inputs[row, :len(ids)] = torch.tensor(ids)
            labels[row, first:len(ids)] = torch.tensor(ids[first:])
        mask = torch.arange(width)[None, :] < torch.tensor([len(ids) for ids, _ in batch])[:, None]
        for group in optimizer.param_groups:
            group["lr"] = TRAIN_LR * min(1.0, (step + 1) / TRAIN_WARMUP) * (1.0 - step / steps)
        logits = model(input_ids=inputs.to(device), attention_mask=mask.long().to(device)).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1).to(device),
                               ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"step {step} loss {loss.item():.3f} ({time.time() - started:.0f}s)")
    model.eval()
    return loss.item(), time.time() - started


def training_record(checkpoint):
    """OUT_DIR/golden/NAME_training.json: how the checkpoint OUT_DIR/NAME was trained."""
    directory, name = os.path.split(os.path.normpath(checkpoint))
    return os.path.join(directory, "golden", f"{name}_training.json")


def create_checkpoint(directory, name, spm_bytes, args):
    import torch
    from transformers import GenerationConfig
    spec = MODELS[name]
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    tokenizer = build_tokenizer(directory, spm_bytes, spec.get("legacy_tokenizer", False))
    model = build_model(spec, len(tokenizer), args.seed)
    loss, seconds = train_briefly(model, tokenizer, args.data, args.seed, args.steps, args.device)
    with torch.no_grad():
        model.model.norm.weight.mul_(SHARPEN)
    model.generation_config = GenerationConfig(bos_token_id=BOS, eos_token_id=EOS, **spec.get("generation", {}))
    model.to("cpu").save_pretrained(directory)
    # Beside the goldens, not in the checkpoint: the summary reads it again when only the goldens are remade.
    os.makedirs(os.path.dirname(training_record(directory)), exist_ok=True)
    with open(training_record(directory), "w", encoding="utf-8") as record:
        json.dump(dict(steps=args.steps, seed=args.seed, final_loss=round(loss, 4), seconds=round(seconds),
                       device=args.device), record)


# --- goldens --------------------------------------------------------------------------------------

def golden_sources(data_dir, count):
    """Multi30k test_2016_flickr English lines, then the extra sources, count in all."""
    return read_lines(data_dir, "multi30k/test_2016_flickr.en")[:count - len(EXTRA_SOURCES)] + EXTRA_SOURCES


def generation_config(num_beams):
    from transformers import GenerationConfig
    return GenerationConfig(num_beams=num_beams, do_sample=False, num_return_sequences=1, length_penalty=1.0,
                            early_stopping=False, max_new_tokens=MAX_NEW_TOKENS, min_length=0, bad_words_ids=None,
                            forced_eos_token_id=None, repetition_penalty=1.0, no_repeat_ngram_size=0,
                            renormalize_logits=False, eos_token_id=EOS, pad_token_id=EOS, bos_token_id=BOS,
                            output_scores=True, output_logits=True, return_dict_in_generate=True, use_cache=True)


def run_generate(model, prompt_ids, config, device):
    """(generated ids without EOS, finished, score, smallest top-2 logit gap of a greedy step, teacher-forced
    beam score difference)."""
    import torch
    inputs = torch.tensor([prompt_ids], device=device)
    with torch.no_grad():
        result = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), generation_config=config)
    sequence = result.sequences[0].tolist()
    if sequence[:len(prompt_ids)] != list(prompt_ids):
        raise RuntimeError("generate() did not return the prompt first")
    generated = sequence[len(prompt_ids):]
    finished = bool(generated) and generated[-1] == EOS
    gap, check = float("inf"), 0.0
    if config.num_beams == 1:
        # As in the other goldens: the sum of log_softmax(raw logits) over the generated tokens, EOS included.
        logits = torch.stack([step[0] for step in result.logits]).double().cpu()
        log_probs = torch.log_softmax(logits, dim=-1)[torch.arange(len(generated)), torch.tensor(generated)]
        score = float(log_probs.sum())
        top = torch.topk(logits, 2, dim=-1).values
        gap = float((top[:, 0] - top[:, 1]).min())
    else:
        score = float(result.sequences_scores[0])
        check = abs(teacher_forced_score(model, sequence, len(prompt_ids), device) - score)
    return (generated[:-1] if finished else generated), finished, score, gap, check


def teacher_forced_score(model, sequence, prompt_length, device):
    """The sum of the generated tokens' log-probabilities divided by their number (EOS included): what HF's
    sequences_scores should be with length_penalty 1 (recorded as a check of the goldens' score column)."""
    import torch
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([sequence], device=device)).logits[0].double().cpu()
    log_probs = torch.log_softmax(logits[prompt_length - 1:-1], dim=-1)
    generated = torch.tensor(sequence[prompt_length:])
    return float(log_probs[torch.arange(len(generated)), generated].sum()) / len(generated)


def settings_line(name, num_beams, add_bos, device):
    template = urllib.parse.quote(PROMPT.replace("{source}", "\0"), safe=":").replace("%00", "{source}")
    return (f"model={name} num_beams={num_beams} do_sample=False length_penalty=1.0 early_stopping=False "
            f"num_return_sequences=1 max_new_tokens={MAX_NEW_TOKENS} bad_words_ids=None forced_eos_token_id=None "
            f"min_length=0 repetition_penalty=1.0 no_repeat_ngram_size=0 target_prefixes=none "
            f"prompt_template={template} bos_id={BOS} eos_id={EOS} pad_id={EOS} add_bos={add_bos} "
            f"batch_size=1 dtype=float32 device={device} "
            f"score={'sequences_scores' if num_beams > 1 else 'sum(log_softmax(raw logits))'} "
            f"columns=source_text,prompt_ids,output_ids,finished,score")


def convert(directory, output, dtype="fp32"):
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "convert_hf.py"), directory, output,
                    "--dtype", dtype], check=True, stdout=subprocess.DEVNULL)


def make_goldens(out_dir, name, args):
    import torch
    from transformers import LlamaForCausalLM, LlamaTokenizer
    checkpoint = os.path.join(out_dir, name)
    golden = os.path.join(out_dir, "golden")
    os.makedirs(golden, exist_ok=True)
    convert(checkpoint, os.path.join(out_dir, f"{name}.seqtrans"))
    tokenizer = LlamaTokenizer.from_pretrained(checkpoint)
    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    model.to(args.device).eval()
    sources = golden_sources(args.data, args.lines)
    prompts = [PROMPT.format(source=source) for source in sources]
    prompt_ids = [tokenizer(prompt)["input_ids"] for prompt in prompts]
    summaries = {}
    for label, num_beams in GOLDEN_SETS:
        config = generation_config(num_beams)
        started = time.time()
        rows, near_ties, min_gap, max_check = [], [], float("inf"), 0.0
        for line_number, (source, ids) in enumerate(zip(sources, prompt_ids), start=2):
            output, finished, score, gap, check = run_generate(model, ids, config, args.device)
            rows.append((source, ids, output, finished, score))
            min_gap, max_check = min(min_gap, gap), max(max_check, check)
            if gap < NEAR_TIE:
                near_ties.append((line_number, gap))
        write_tsv(os.path.join(golden, f"{name}_{label}.tsv"), settings_line(name, num_beams, prompt_ids[0][0] == BOS, args.device), rows)
        lengths = sorted(len(row[2]) for row in rows)
        summaries[label] = dict(num_beams=num_beams, seconds=time.time() - started, total=len(rows),
                                finished=sum(row[3] for row in rows), min_gap=min_gap, near_ties=near_ties,
                                at_limit=sum(at_limit(row, MAX_NEW_TOKENS) for row in rows),
                                distinct=len({tuple(row[2]) for row in rows}), max_check=max_check,
                                lengths=(lengths[0], lengths[len(lengths) // 2], lengths[-1]),
                                example=tokenizer.decode(rows[0][2], skip_special_tokens=True))
        log(f"{name} {label}: { {key: value for key, value in summaries[label].items() if key != 'near_ties'} }")
    agreeing = sum(file_prompt_ids(os.path.join(out_dir, f"{name}.seqtrans"))(prompt) == ids
                   for prompt, ids in zip(prompts, prompt_ids))
    write_summary(golden, name, args, sources, prompt_ids, summaries, agreeing, checkpoint)


# --- the converted file's tokenizer, as the C++ PromptTokenizer computes it ------------------------

def file_prompt_ids(model_file):
    """A function prompt -> ids from the converted file alone: the text cut at <unk>, <s>, </s>, each stretch
    prefixed with a space as the file's space_prefix says, encoded by its (normalizer-free) SentencePiece model."""
    import sentencepiece as spm
    from seqtrans_file import pb, read_header
    header, _ = read_header(model_file)
    processor = spm.SentencePieceProcessor(model_proto=header.tokenizer.target_spm)
    config, scheme = header.config, header.tokenizer.space_prefix
    specials = [(processor.id_to_piece(model_id), model_id) for model_id in (config.unk_id, config.bos_id, config.eos_id)]

    def stretch_ids(stretch, at_start):
        if not stretch:
            return []
        prefix = not stretch.startswith((" ", "▁")) and (
            scheme == pb.SPACE_PREFIX_ALWAYS or (scheme == pb.SPACE_PREFIX_FIRST and at_start))
        return processor.encode((" " if prefix else "") + stretch)

    def encode(text):
        ids = [config.bos_id] if header.tokenizer.add_bos else []
        start, at_start = 0, True
        while True:
            found = min(((text.find(piece, start), -len(piece), model_id) for piece, model_id in specials
                         if text.find(piece, start) >= 0), default=None)
            if found is None:
                return ids + stretch_ids(text[start:], at_start)
            ids += stretch_ids(text[start:found[0]], at_start) + [found[2]]
            start, at_start = found[0] - found[1], False
    return encode


# --- the tokenizer cases --------------------------------------------------------------------------

def escape(text):
    return (text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
            .replace("\0", "\\0"))


def decode_cases(tokenizer, rng):
    """Id sequences to decode: HF's ids of some texts, byte runs valid and not, specials, leading "▁" pieces,
    and random ids."""
    byte = {value: tokenizer.convert_tokens_to_ids(f"<0x{value:02X}>") for value in range(256)}
    space = tokenizer.convert_tokens_to_ids("▁")
    word = tokenizer("Mann", add_special_tokens=False)["input_ids"]
    cases = [tokenizer(text)["input_ids"] + [EOS] for text in TOKENIZER_TEXTS[:20]]
    cases += [[], [BOS], [EOS, UNK, BOS], [space], [space, space] + word, word + [space],
              [byte[0xF0], byte[0x9F], byte[0x98], byte[0x80]],        # 😀
              [byte[0xC3], byte[0xBC]] + word,                          # ü then a word
              [byte[0xE4], byte[0xB8]] + word,                          # an incomplete sequence
              [byte[0xFF], byte[0x41]], [byte[0x41], UNK, byte[0x42]], [byte[0xC3], EOS, byte[0xBC]],
              [byte[0x20]] + word, [byte[0x0A]] + word, word + [BOS] + word]
    cases += [rng.integers(0, len(tokenizer), int(rng.integers(1, 16))).tolist() for _ in range(30)]
    return cases


def write_tokenizer_cases(out_dir, checkpoint, seed):
    """OUT_DIR/golden/llama_tokenizer.tsv: encode lines "encode SCHEME TEXT IDS" and decode lines
    "decode SCHEME IDS TEXT" (tab-separated; texts with backslash escapes \\\\ \\t \\n \\r \\0)."""
    from transformers import LlamaTokenizer
    rng = np.random.default_rng(seed)
    lines = [f"# HF LlamaTokenizer (transformers) on the tokenizer of {os.path.basename(checkpoint)}: "
             "columns kind, space_prefix, input, expected"]
    for scheme, options in TOKENIZER_SCHEMES.items():
        tokenizer = LlamaTokenizer.from_pretrained(checkpoint, **options)
        for text in TOKENIZER_TEXTS:
            lines.append(f"encode\t{scheme}\t{escape(text)}\t{' '.join(map(str, tokenizer(text)['input_ids']))}")
        if scheme != "always":   # decoding differs only by add_prefix_space
            for ids in decode_cases(tokenizer, rng):
                text = tokenizer.decode(ids, skip_special_tokens=True)
                lines.append(f"decode\t{scheme}\t{' '.join(map(str, ids))}\t{escape(text)}")
    with open(os.path.join(out_dir, "golden", "llama_tokenizer.tsv"), "w", encoding="utf-8") as cases:
        cases.write("\n".join(lines) + "\n")
    log(f"wrote {len(lines) - 1} tokenizer cases")


def write_summary(golden, name, args, sources, prompt_ids, summaries, agreeing, checkpoint):
    import sentencepiece
    import torch
    import transformers
    spec = MODELS[name]
    with open(training_record(checkpoint), encoding="utf-8") as record:
        training = json.load(record)
    lengths = sorted(map(len, prompt_ids))
    settings = ", ".join(f"{key}={value}" for key, value in spec.items() if key != "generation")
    lines = [
        f"# {name}: Hugging Face generate() goldens", "",
        f"Made by `scripts/make_llama_goldens.py test/data --models {name}` (seed {training['seed']}) with transformers "
        f"{transformers.__version__}, torch {torch.__version__}, sentencepiece {sentencepiece.__version__}, Python "
        f"{platform.python_version()}, on the {args.device.upper()} in fp32, "
        f"{time.strftime('%Y-%m-%d')}.", "",
        f"## The model: `test/data/{name}/`, converted: `test/data/{name}.seqtrans`", "",
        f"A small `LlamaForCausalLM` saved with `save_pretrained`, its `LlamaTokenizer` files and `tokenizer.model` "
        f"(SentencePiece BPE, {SPM_VOCAB_SIZE} pieces, byte fallback, identity normalization, trained on "
        f"{SPM_TRAIN_LINES:,} lines each of Multi30k train English and German). Shape: "
        + ", ".join(f"{key}={value}" for key, value in SHAPE.items()) + f"; {settings}. "
        + (f"generation_config.json adds {spec['generation']}. " if "generation" in spec else "")
        + f"Trained {training['steps']} AdamW steps ({TRAIN_BATCH} sequences a step, lr {TRAIN_LR}) on Multi30k "
        f"train as \"English: {{src}}\\nGerman: {{tgt}}</s>\", the loss on the German side and </s> (final loss "
        f"{training['final_loss']}, {training['seconds']} s on the {training['device']}), then the final norm x "
        f"{SHARPEN}. The translations are poor; only the exact computation matters.", "",
        f"Inputs: {len(sources)} prompts `English: {{source}}\\nGerman:` (the settings line's `prompt_template`, "
        f"percent-encoded), the sources being the first {len(sources) - len(EXTRA_SOURCES)} lines of Multi30k "
        f"test_2016_flickr.en and {len(EXTRA_SOURCES)} more (non-ASCII, emoji, extra spaces, an empty source); "
        f"{lengths[0]} to {lengths[-1]} prompt ids with HF's tokenizer, BOS first, no EOS. Outputs: the generated "
        "ids after the prompt, without EOS; no `bad_words_ids`.", "",
        f"Converted-file check: the converted file's tokenizer (SentencePiece model and prefix scheme, as the C++ "
        f"PromptTokenizer computes) gives HF's prompt ids on {agreeing} of {len(sources)} prompts.", "",
        "## Golden sets", "",
        "| file | num_beams | max_new_tokens | finished with EOS | at the limit | distinct outputs | output length min / "
        "median / max | smallest top-2 gap (greedy) | teacher-forced score check | time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, summary in summaries.items():
        gap = f"{summary['min_gap']:.4f}" if summary["min_gap"] != float("inf") else "-"
        check = f"{summary['max_check']:.1e}" if summary["num_beams"] > 1 else "-"
        lines.append(f"| `{name}_{label}.tsv` | {summary['num_beams']} | {MAX_NEW_TOKENS} | {summary['finished']} of "
                     f"{summary['total']} | {summary['at_limit']} of {summary['total']} | {summary['distinct']} | "
                     f"{' / '.join(map(str, summary['lengths']))} | {gap} | {check} | {summary['seconds']:.0f} s |")
    lines += ["", f"First greedy output: \"{summaries['greedy']['example']}\" (source: \"{sources[0]}\").", "",
              f"Near-ties (greedy, file line numbers, top-2 logit gap below {NEAR_TIE:g}): "
              + (", ".join(f"{line} ({gap:.1e})" for line, gap in summaries["greedy"]["near_ties"]) or "none") + ".",
              "", "Teacher-forced score check (beam4): the largest difference between `sequences_scores` and the sum of "
              "the output's log-probabilities (EOS included) divided by its length, computed in one forward pass.",
              "", f"Regenerate the goldens only: `scripts/make_llama_goldens.py test/data --models {name} --reuse`.", ""]
    with open(os.path.join(golden, f"{name}.md"), "w", encoding="utf-8") as summary_file:
        summary_file.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="writes OUT_DIR/NAME, OUT_DIR/NAME.seqtrans and OUT_DIR/golden")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--data", default=default_data_dir(), help="data directory (multi30k/; default "
                        "$SEQTRANS_DATA, else .data/; see docs/DATA.md)")
    parser.add_argument("--steps", type=int, default=600, help="training steps per model")
    parser.add_argument("--lines", type=int, default=50, help="golden prompts per set")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--reuse", action="store_true", help="keep existing checkpoints; make only the goldens")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (one is fastest on a shared machine)")
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        sys.exit(f"make_llama_goldens: error: unknown model {unknown[0]} (known: {', '.join(MODELS)})")
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    spm_bytes = None if args.reuse else train_spm(args.data, args.seed)
    for name in names:
        started = time.time()
        if not args.reuse:
            create_checkpoint(os.path.join(args.out_dir, name), name, spm_bytes, args)
        make_goldens(args.out_dir, name, args)
        log(f"{name} done in {time.time() - started:.0f}s")
    write_tokenizer_cases(args.out_dir, os.path.join(args.out_dir, names[0]), args.seed)


if __name__ == "__main__":
    main()
