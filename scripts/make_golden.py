#!/usr/bin/env python3
"""Makes the tiny MarianMT test models and the Hugging Face golden outputs for seqtrans' e2e tests.

Usage: make_golden.py OUT_DIR [--model NAME] [--sets LABEL,...] [--data DIR] [--device auto|cpu|cuda]
                      [--checkpoint DIR]

Writes OUT_DIR/NAME/ (an HF checkpoint that MarianTokenizer and MarianMTModel load) and
OUT_DIR/golden/{NAME_LABEL.tsv for every golden set of the model, NAME.md (versions, settings and a
summary)}. With --checkpoint, an existing checkpoint is reused (copied) instead of creating a new model.

Models (CHECKPOINTS): marian_tiny is a small Marian with one joint vocabulary, shared and tied
embeddings and swish (the first OPUS-MT layout); marian_separate has separate source and target
vocabularies (target_vocab.json, separate_vocabs), an untied output layer, relu, and the generation
defaults newer OPUS-MT checkpoints carry (forced_eos_token_id, max_length, num_beams). Both are
post-norm with sinusoids, trained briefly on Multi30k and newstest (a randomly initialised one ends at
the first step or never), with a random output bias and a sharpened last layer norm so that top
choices are rarely near-ties. Everything is seeded; the checkpoints are committed, so rerun with
--checkpoint to keep them.

TSV lines: source_text, source_ids (EOS included), output_ids (decoder start and EOS excluded),
finished (1 if EOS ended the output), score (%.6f). See test/data/golden/README.md.
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
# The second golden model: the newer OPUS-MT layout. Its two vocabularies have the same size so that
# <pad> (last in each) has one id on both sides, as seqtrans's tokenizer and HF's padding_idx need.
SEPARATE_CONFIG = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                       max_position_embeddings=256, activation_function="relu", scale_embedding=True,
                       share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
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
NEAR_TIE = 1e-3           # greedy steps whose top-2 logit gap is below this are listed in the summary


# One golden checkpoint: its shape, vocabularies, training and the generation defaults it records.
CHECKPOINTS = {
    "marian_tiny": dict(config=TINY_CONFIG, separate_vocabs=False, train_steps=TRAIN_STEPS,
                        generation=dict(max_length=256)),
    "marian_separate": dict(config=SEPARATE_CONFIG, separate_vocabs=True, train_steps=1500,
                            generation=dict(max_length=256, num_beams=4, forced_eos_token_id=0)),
}
# The golden sets of each checkpoint: (file label, num_beams, max_new_tokens, forced EOS[, extras]). Outputs
# run to a median of ~46 tokens, so max_new_tokens=12 stops most of them at the limit, with and without
# HF's ForcedEOSTokenLogitsProcessor (forced_eos_token_id = EOS). Extras: HF's repetition controls
# (repetition_penalty, no_repeat_ngram_size) and target prefixes (given to generate() as
# decoder_input_ids = [decoder start] + the target ids of TARGET_PREFIXES[line % 5], the last one none).
REPETITION = dict(repetition_penalty=1.3, no_repeat_ngram_size=3)
TARGET_PREFIXES = ["Ein", "Die", "Zwei", "Heute", ""]
GOLDEN_SETS = {
    "marian_tiny": [("greedy", 1, 80, False), ("beam4", 4, 80, False),
                    ("greedy_limit12", 1, 12, False), ("beam4_limit12", 4, 12, False),
                    ("greedy_limit12_forced", 1, 12, True), ("beam4_limit12_forced", 4, 12, True),
                    ("greedy_repetition", 1, 40, False, REPETITION), ("beam4_repetition", 4, 40, False, REPETITION),
                    ("greedy_prefix", 1, 40, False, dict(prefixes=TARGET_PREFIXES)),
                    ("beam4_prefix", 4, 40, False, dict(prefixes=TARGET_PREFIXES))],
    "marian_separate": [("greedy", 1, 80, True), ("beam4", 4, 80, True),
                        ("greedy_limit12", 1, 12, False), ("beam4_limit12", 4, 12, False),
                        ("greedy_limit12_forced", 1, 12, True), ("beam4_limit12_forced", 4, 12, True)],
}


def default_data_dir():
    """$SEQTRANS_DATA, else .data/ in the repository (docs/DATA.md: layout and where to get the corpora)."""
    return os.environ.get("SEQTRANS_DATA", os.path.join(REPO, ".data"))


def read_lines(data_dir, relative):
    path = os.path.join(data_dir, relative)
    if not os.path.isfile(path):
        sys.exit(f"make_golden: error: {path}: file not found (pass --data DIR; docs/DATA.md says where to get it)")
    with open(path, encoding="utf-8") as text_file:
        return [line.rstrip("\n") for line in text_file]


def clean(text):
    return " ".join(text.replace("\t", " ").replace("\r", " ").replace("\n", " ").split())


# --- the checkpoint -------------------------------------------------------------------------------

def spm_lines(data_dir, languages):
    """Multi30k train lines of each language, then newstest2013 lines of each (the joint model's order)."""
    lines = []
    for language in languages:
        lines += read_lines(data_dir, f"multi30k/train.{language}")[:2000]
    for language in languages:
        lines += read_lines(data_dir, f"wmt-newstest-en-de/newstest2013.{language}")[:1500]
    return lines


def train_spm(data_dir, seed, languages=("en", "de")):
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    # Default SentencePiece ids (<unk>=0, <s>=1, </s>=2) differ from the model ids in vocab.json,
    # as in OPUS-MT, so the piece -> id mapping is exercised by the tests. No normalisation rule
    # keeps the .spm files small (the NFKC table alone is 240 kB; the demo model has it).
    spm.SentencePieceTrainer.train(sentence_iterator=iter(spm_lines(data_dir, languages)), model_writer=model,
                                   model_type="unigram", vocab_size=SPM_VOCAB_SIZE, character_coverage=1.0,
                                   normalization_rule_name="identity", num_threads=1, minloglevel=2)
    return model.getvalue()


def train_briefly(model, vocabs, data_dir, seed, steps, device):
    """A few thousand AdamW steps on Multi30k train and newstest2012/2013 (fp32, seeded). vocabs: (source,
    target) Vocabulary objects, whose <pad> ids are equal."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from train_demo import PairSet
    sources, targets = [], []
    for stem in ("multi30k/train", "wmt-newstest-en-de/newstest2012", "wmt-newstest-en-de/newstest2013"):
        sources += read_lines(data_dir, f"{stem}.en")
        targets += read_lines(data_dir, f"{stem}.de")
    source_vocab, vocab = vocabs
    sources, targets = source_vocab.encode(sources), vocab.encode(targets)
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


def generation_defaults(pad_id, eos_id, defaults):
    """The checkpoint's generation_config.json: ids, pad suppressed, and the model's decoding defaults."""
    from transformers import GenerationConfig
    settings = dict(forced_eos_token_id=None)
    settings.update(defaults)
    return GenerationConfig(decoder_start_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id,
                            bad_words_ids=[[pad_id]], **settings)


def create_checkpoint(directory, name, data_dir, seed, steps, device):
    import torch
    from transformers import MarianConfig, MarianMTModel
    from train_demo import Vocabulary
    spec = CHECKPOINTS[name]
    torch.manual_seed(seed)
    if spec["separate_vocabs"]:
        spm_files = (train_spm(data_dir, seed, ("en",)), train_spm(data_dir, seed, ("de",)))
    else:
        spm_bytes = train_spm(data_dir, seed)
        spm_files = (spm_bytes, spm_bytes)
    source_vocab, vocab = Vocabulary(spm_files[0]), Vocabulary(spm_files[1])
    if source_vocab.pad_id != vocab.pad_id:
        raise RuntimeError(f"<pad> ids differ: source {source_vocab.pad_id}, target {vocab.pad_id}")
    config = MarianConfig(vocab_size=len(source_vocab), decoder_vocab_size=len(vocab), pad_token_id=vocab.pad_id,
                          eos_token_id=vocab.eos_id, decoder_start_token_id=vocab.pad_id,
                          forced_eos_token_id=spec["generation"].get("forced_eos_token_id"),
                          bos_token_id=None, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
                          **spec["config"])
    model = MarianMTModel(config).to(device)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(seed)
        model.final_logits_bias.copy_(LOGITS_BIAS_STD * torch.randn(model.final_logits_bias.shape,
                                                                    generator=generator).to(device))
    train_briefly(model, (source_vocab, vocab), data_dir, seed, steps, device)
    model = model.cpu()
    with torch.no_grad():
        last_norm = model.model.decoder.layers[-1].final_layer_norm
        last_norm.weight.mul_(SHARPEN)
        last_norm.bias.mul_(SHARPEN)
    model.generation_config = generation_defaults(vocab.pad_id, vocab.eos_id, spec["generation"])
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory)
    for file_name, spm_bytes in zip(("source.spm", "target.spm"), spm_files):
        with open(os.path.join(directory, file_name), "wb") as spm_file:
            spm_file.write(spm_bytes)
    vocab_files = [("vocab.json", source_vocab)] + ([("target_vocab.json", vocab)] if spec["separate_vocabs"] else [])
    for file_name, file_vocab in vocab_files:
        with open(os.path.join(directory, file_name), "w", encoding="utf-8") as vocab_file:
            json.dump(file_vocab.ids, vocab_file, ensure_ascii=False, indent=0)
    tokenizer_config = {"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
                        "separate_vocabs": spec["separate_vocabs"], "unk_token": "<unk>", "eos_token": "</s>",
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

def generation_config(num_beams, max_new_tokens, pad_id, eos_id, forced_eos, extras=None):
    from transformers import GenerationConfig
    extras = extras or {}
    return GenerationConfig(num_beams=num_beams, do_sample=False, num_return_sequences=1,
                            length_penalty=1.0, early_stopping=False, max_new_tokens=max_new_tokens,
                            min_length=0, min_new_tokens=None, bad_words_ids=[[pad_id]],
                            forced_bos_token_id=None, forced_eos_token_id=eos_id if forced_eos else None,
                            repetition_penalty=extras.get("repetition_penalty", 1.0),
                            no_repeat_ngram_size=extras.get("no_repeat_ngram_size", 0),
                            encoder_no_repeat_ngram_size=0,
                            renormalize_logits=False, decoder_start_token_id=pad_id, eos_token_id=eos_id,
                            pad_token_id=pad_id, bos_token_id=None, output_scores=True, output_logits=True,
                            return_dict_in_generate=True, use_cache=True)


def run_generate(model, source_ids, config, device, prefix_ids=()):
    """Returns (output ids without start/EOS/pad, finished, score, min top-2 logit gap for greedy). A target
    prefix goes in as decoder_input_ids and comes back at the start of the output; the score is that of the
    tokens after it (HF scores only new tokens; seqtrans's forced prefix adds 0). Greedy scores with
    repetition controls are NaN: HF reports none, and the processed logits are not seqtrans's normalizer."""
    import torch
    pad_id, eos_id = config.pad_token_id, config.eos_token_id
    inputs = torch.tensor([source_ids], device=device)
    kwargs = {}
    if prefix_ids:
        kwargs["decoder_input_ids"] = torch.tensor([[pad_id] + list(prefix_ids)], device=device)
    with torch.no_grad():
        result = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), generation_config=config,
                                **kwargs)
    sequence = result.sequences[0].tolist()
    if sequence[0] != pad_id or sequence[1:1 + len(prefix_ids)] != list(prefix_ids):
        raise RuntimeError(f"generate() did not start with the decoder start id and the prefix: {sequence[:3]}")
    prefix = sequence[1:1 + len(prefix_ids)]
    sequence = sequence[1 + len(prefix_ids):]
    while sequence and sequence[-1] == pad_id:
        sequence.pop()
    if pad_id in sequence:
        raise RuntimeError("generate() produced the suppressed pad id")
    finished = bool(sequence) and sequence[-1] == eos_id
    # HF's ForcedEOSTokenLogitsProcessor acts at cur_len == max_length - 1, the decoder start counted: the
    # step that would generate token number max_new_tokens.
    forced_step = config.max_new_tokens - 1 if config.forced_eos_token_id is not None else None
    if forced_step is not None and len(sequence) > forced_step and not (finished and len(sequence) == forced_step + 1):
        raise RuntimeError(f"forced EOS: {len(sequence)} tokens, the last {sequence[-1]}")
    gap = float("inf")
    if config.num_beams == 1 and (config.repetition_penalty != 1.0 or config.no_repeat_ngram_size):
        score = float("nan")
    elif config.num_beams == 1:
        # HF beam search takes log_softmax over the raw logits (pad included) and then applies the
        # processors (pad -> -inf, a forced step -> EOS 0); the greedy score is the same sum of processed
        # log-probs so that both files mean the same thing: a forced EOS adds 0.
        logits = torch.stack([step[0] for step in result.logits]).float()   # [steps, vocab]
        if logits.shape[0] != len(sequence):
            raise RuntimeError(f"greedy: {logits.shape[0]} logits for {len(sequence)} tokens")
        chosen = torch.tensor(sequence, device=logits.device)
        steps = torch.arange(len(sequence), device=logits.device)
        token_log_probs = torch.log_softmax(logits, dim=-1)[steps, chosen].double()
        if forced_step is not None and len(sequence) > forced_step:
            token_log_probs[forced_step] = 0.0
            logits = logits[:forced_step]   # the forced step has no choice: no gap to report
        score = float(token_log_probs.sum())
        logits[:, pad_id] = float("-inf")
        if logits.shape[0]:
            top = torch.topk(logits, 2, dim=-1).values
            gap = float((top[:, 0] - top[:, 1]).min())
    else:
        score = float(result.sequences_scores[0])
    if finished:
        sequence = sequence[:-1]
    return prefix + sequence, finished, score, gap


def write_tsv(path, comment, rows):
    with open(path, "w", encoding="utf-8") as tsv:
        tsv.write(f"# {comment}\n")
        for text, source_ids, output_ids, finished, score in rows:
            tsv.write(f"{text}\t{' '.join(map(str, source_ids))}\t{' '.join(map(str, output_ids))}\t"
                      f"{int(finished)}\t{score:.6f}\n")


def at_limit(row, max_new_tokens):
    """True when the output used every allowed position (EOS included when generated)."""
    return len(row[2]) + int(row[3]) >= max_new_tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="writes OUT_DIR/MODEL and OUT_DIR/golden")
    parser.add_argument("--model", default="marian_tiny", choices=sorted(CHECKPOINTS), help="the golden checkpoint")
    parser.add_argument("--sets", help="comma-separated golden set labels to run (default: all of the model's: "
                        + "; ".join(f"{name}: {','.join(entry[0] for entry in sets)}" for name, sets in GOLDEN_SETS.items())
                        + ")")
    parser.add_argument("--data", default=default_data_dir(), help="data directory (multi30k/, wmt-newstest-en-de/, "
                        "tatoeba-manythings-en-de/; default $SEQTRANS_DATA, else .data/; see docs/DATA.md)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--checkpoint", help="reuse this checkpoint of the model instead of creating one")
    parser.add_argument("--train-steps", type=int, help="training steps (default: the model's, see CHECKPOINTS)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N inputs (quick checks)")
    args = parser.parse_args()
    sets = GOLDEN_SETS[args.model]
    if args.sets:
        wanted = args.sets.split(",")
        unknown = sorted(set(wanted) - {entry[0] for entry in sets})
        if unknown:
            sys.exit(f"make_golden: error: {args.model} has no golden set {unknown[0]}")
        sets = [entry for entry in sets if entry[0] in wanted]
    if args.train_steps is None:
        args.train_steps = CHECKPOINTS[args.model]["train_steps"]

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

    checkpoint = os.path.join(args.out_dir, args.model)
    golden = os.path.join(args.out_dir, "golden")
    os.makedirs(golden, exist_ok=True)
    started = time.time()
    if args.checkpoint:
        if os.path.abspath(args.checkpoint) != os.path.abspath(checkpoint):
            shutil.copytree(args.checkpoint, checkpoint, dirs_exist_ok=True)
    else:
        create_checkpoint(checkpoint, args.model, args.data, args.seed, args.train_steps, device)
    tokenizer = MarianTokenizer.from_pretrained(checkpoint)
    model = MarianMTModel.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    pad_id, eos_id = model.config.pad_token_id, model.config.eos_token_id
    inputs = select_inputs(args.data, tokenizer, args.seed)
    if args.limit:
        inputs = inputs[:args.limit]
    source_ids = [tokenizer(text)["input_ids"] for text in inputs]
    print(f"make_golden: {args.model}: {len(inputs)} inputs, source lengths {min(map(len, source_ids))}.."
          f"{max(map(len, source_ids))} ids, device {device}, checkpoint ready in {time.time() - started:.1f}s",
          flush=True)

    summaries = {}
    for label, num_beams, max_new_tokens, forced_eos, *more in sets:
        extras = more[0] if more else {}
        config = generation_config(num_beams, max_new_tokens, pad_id, eos_id, forced_eos, extras)
        prefix_texts = extras.get("prefixes", [])
        prefix_ids = [tokenizer(text_target=text)["input_ids"][:-1] if text else [] for text in prefix_texts]
        model.generation_config = config
        step_started = time.time()
        rows = []
        min_gap = float("inf")
        near_ties = []
        for line_number, (text, ids) in enumerate(zip(inputs, source_ids), start=2):
            prefix = prefix_ids[(line_number - 2) % len(prefix_ids)] if prefix_ids else ()
            output, finished, score, gap = run_generate(model, ids, config, device, prefix)
            rows.append((text, ids, output, finished, score))
            min_gap = min(min_gap, gap)
            if gap < NEAR_TIE:
                near_ties.append((line_number, gap))
        greedy_score = "sum(log_softmax(raw logits))" + (" (a forced EOS adds 0)" if forced_eos else "")
        if config.repetition_penalty != 1.0 or config.no_repeat_ngram_size:
            greedy_score = "nan"
        setting_line = (f"model={args.model} num_beams={num_beams} do_sample=False length_penalty=1.0 "
                        f"early_stopping=False num_return_sequences=1 max_new_tokens={max_new_tokens} "
                        f"bad_words_ids=[[{pad_id}]] forced_eos_token_id={eos_id if forced_eos else None} "
                        f"min_length=0 repetition_penalty={config.repetition_penalty} "
                        f"no_repeat_ngram_size={config.no_repeat_ngram_size} "
                        f"target_prefixes={','.join(prefix_texts) if prefix_texts else 'none'} "
                        f"decoder_start_id={pad_id} "
                        f"eos_id={eos_id} batch_size=1 dtype=float32 device={device} "
                        f"score={'sequences_scores' if num_beams > 1 else greedy_score} "
                        f"columns=source_text,source_ids,output_ids,finished,score")
        write_tsv(os.path.join(golden, f"{args.model}_{label}.tsv"), setting_line, rows)
        lengths = sorted(len(row[2]) for row in rows)
        summaries[label] = dict(num_beams=num_beams, max_new_tokens=max_new_tokens, forced_eos=forced_eos,
                                seconds=time.time() - step_started, finished=sum(row[3] for row in rows),
                                at_limit=sum(at_limit(row, max_new_tokens) for row in rows), total=len(rows),
                                min_len=lengths[0], median_len=lengths[len(lengths) // 2], max_len=lengths[-1],
                                min_gap=min_gap, near_ties=near_ties)
        print(f"make_golden: {args.model} {label}: "
              f"{ {key: value for key, value in summaries[label].items() if key != 'near_ties'} }", flush=True)

    write_summary(golden, args, device, inputs, source_ids, summaries)
    print(f"make_golden: done in {time.time() - started:.1f}s", flush=True)


def describe_checkpoint(name, train_steps):
    spec = CHECKPOINTS[name]
    vocabularies = ("two SentencePiece unigram models (source.spm: English, target.spm: German; "
                    f"{SPM_VOCAB_SIZE} pieces each, trained on 3,500 lines of Multi30k train and newstest2013 "
                    "of their language) and two OPUS-MT-style vocabularies, `vocab.json` (source) and "
                    "`target_vocab.json` (target), `separate_vocabs: true`"
                    if spec["separate_vocabs"] else
                    f"`source.spm` = `target.spm` (one joint SentencePiece unigram model, {SPM_VOCAB_SIZE} pieces, "
                    "trained on 7,000 lines of Multi30k train and newstest2013, English and German) and one "
                    "OPUS-MT-style `vocab.json`")
    return (f"A small `MarianMTModel` saved with `save_pretrained` (safetensors) plus {vocabularies} "
            "(`</s>` = 0, `<unk>` = 1, the other pieces in SentencePiece order, `<pad>` last; SentencePiece's own "
            "ids differ; identity normalisation). Shape: "
            + ", ".join(f"{key}={value}" for key, value in spec["config"].items()) + ". "
            f"generation_config.json: bad_words_ids=[[pad]], "
            + ", ".join(f"{key}={value}" for key, value in spec["generation"].items()) + ". "
            f"Weights: HF's initialisation, a fixed random `final_logits_bias` N(0, {LOGITS_BIAS_STD}), then "
            f"{train_steps} AdamW steps (lr {TRAIN_LR}, {TRAIN_MAX_TOKENS}-token batches, label smoothing 0.1) "
            "on Multi30k train + newstest2012/2013, then the last decoder layer norm's gamma and beta multiplied by "
            f"{SHARPEN} (logits x {SHARPEN}) so that the best token is rarely a near-tie. The translations are "
            "poor; only the exact computation matters. Convert it with "
            f"`scripts/convert_marian.py test/data/{name} OUT.seqtrans --dtype fp32`.")


def write_summary(golden, args, device, inputs, source_ids, summaries):
    """Writes golden/MODEL.md: versions, the checkpoint, the inputs and one summary row per golden set."""
    import torch
    import transformers
    import sentencepiece
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else (platform.processor() or "cpu")
    lengths = sorted(map(len, source_ids))
    lines = [
        f"# {args.model}: Hugging Face generate() goldens",
        "",
        "Written by `scripts/make_golden.py`; the file format and what seqtrans must mirror are in README.md.",
        "",
        f"Made by `scripts/make_golden.py --model {args.model}` (seed {args.seed}) with transformers "
        f"{transformers.__version__}, torch {torch.__version__}, sentencepiece {sentencepiece.__version__}, "
        f"Python {platform.python_version()}, on {device} ({device_name}), {time.strftime('%Y-%m-%d')}"
        + (f", checkpoint reused from `{args.checkpoint}`" if args.checkpoint else "") + ".",
        "",
        f"## The model: `test/data/{args.model}/`",
        "",
        describe_checkpoint(args.model, args.train_steps),
        "",
        f"Inputs: {len(inputs)} lines, {lengths[0]} to {lengths[-1]} source ids (median {lengths[len(lengths) // 2]}), "
        "in shuffled order (see README.md).",
        "",
        "## Golden sets",
        "",
        "| file | num_beams | max_new_tokens | forced EOS | finished with EOS | at the limit | "
        "output length min / median / max | smallest top-2 logit gap (greedy) | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, summary in summaries.items():
        gap = f"{summary['min_gap']:.4f}" if summary["min_gap"] != float("inf") else "-"
        lines.append(f"| `{args.model}_{label}.tsv` | {summary['num_beams']} | {summary['max_new_tokens']} | "
                     f"{'yes' if summary['forced_eos'] else 'no'} | {summary['finished']} of {summary['total']} | "
                     f"{summary['at_limit']} of {summary['total']} | {summary['min_len']} / {summary['median_len']} / "
                     f"{summary['max_len']} | {gap} | {summary['seconds']:.0f} s |")
    lines += ["", "\"At the limit\": the output used all max_new_tokens positions (EOS included when generated).",
              "", f"Near-ties: greedy lines (file line numbers, the `#` line is line 1) where some step's best and "
              f"second-best logits differ by less than {NEAR_TIE:g}, with that gap. Another fp32 implementation may "
              "legitimately pick the other token there; beam lines of the same inputs may be just as sensitive.", ""]
    for label, summary in summaries.items():
        if summary["num_beams"] == 1:
            ties = ", ".join(f"{line} ({gap:.1e})" for line, gap in summary["near_ties"]) or "none"
            lines.append(f"- `{args.model}_{label}.tsv`: {ties}")
    lines += ["", f"Regenerate: `python3 scripts/make_golden.py test/data --model {args.model} --checkpoint "
              f"test/data/{args.model}` (without `--checkpoint` the model is created and trained anew).", ""]
    with open(os.path.join(golden, f"{args.model}.md"), "w", encoding="utf-8") as summary_file:
        summary_file.write("\n".join(lines))


if __name__ == "__main__":
    main()
