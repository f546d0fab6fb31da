#!/usr/bin/env python3
"""Makes tiny multilingual test checkpoints (NLLB-200, M2M-100, mBART-50 layouts) and their HF goldens.

Usage: make_family_goldens.py OUT_DIR [--models NAME,...] [--data DIR] [--steps N] [--lines N] [--reuse]

For each model writes OUT_DIR/NAME/ laid out as the hub ships such a checkpoint (config.json,
generation_config.json, model.safetensors, the tokenizer files the HF tokenizer class saves, plus
sentencepiece.bpe.model) and OUT_DIR/golden/NAME_{greedy,beam4}.tsv and NAME.md: HF generate() outputs,
en -> de with src_lang and forced_bos_token_id set, in the TSV format of test/data/golden/README.md.
With --reuse an existing OUT_DIR/NAME checkpoint is kept and only the goldens are made again.

Models (FAMILIES): nllb_tiny (M2M100ForConditionalGeneration + NllbTokenizer, a SentencePiece BPE model,
three language codes), m2m100_tiny (M2M100ForConditionalGeneration + M2M100Tokenizer: vocab.json and
__xx__ language tokens), mbart50_tiny (MBartForConditionalGeneration + MBart50Tokenizer, a SentencePiece
unigram model, its 52 codes). Each is trained briefly on Multi30k train, en->de and de->en
(a randomly initialised decoder ends at the first step or never). Everything is seeded. The committed
checkpoints were made by a default run, then `--reuse --more-steps 500` (on a shared 2-core machine the
steps come in two runs; 200 steps alone leave most outputs looping).
"""
import argparse
import json
import os
import platform
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import at_limit, default_data_dir, read_lines, spm_lines, write_tsv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM_VOCAB_SIZE = 1000
# Shape shared by the three models: 4 heads of 32 channels as in the Marian goldens.
SHAPE = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, max_position_embeddings=256)
# Every family has fairseq's special ids; the decoder starts with EOS.
BOS, PAD, EOS, UNK = 0, 1, 2, 3
FAMILIES = {
    "nllb_tiny": dict(architecture="M2M100ForConditionalGeneration", tokenizer="NllbTokenizer", spm_type="bpe",
                      codes=("eng_Latn", "deu_Latn", "fra_Latn"), source="eng_Latn", target="deu_Latn",
                      activation="relu", generation=dict(max_length=200)),
    "m2m100_tiny": dict(architecture="M2M100ForConditionalGeneration", tokenizer="M2M100Tokenizer", spm_type="bpe",
                        codes=None, source="en", target="de", activation="relu",
                        generation=dict(max_length=200, num_beams=5)),
    "mbart50_tiny": dict(architecture="MBartForConditionalGeneration", tokenizer="MBart50Tokenizer",
                         spm_type="unigram", codes=None, source="en_XX", target="de_DE", activation="gelu",
                         generation=dict(max_length=200, num_beams=5, forced_eos_token_id=EOS)),
}
GOLDEN_SETS = [("greedy", 1), ("beam4", 4)]
MAX_NEW_TOKENS = 80
TRAIN_MAX_TOKENS = 1500
TRAIN_LR = 3e-3
TRAIN_WARMUP = 50
LOGITS_BIAS_STD = 0.3      # mBART's final_logits_bias: a fixed random draw so that path is exercised
SHARPEN = 2.0              # the decoder's final layer norm x 2 (logits x 2): fewer near-ties
NEAR_TIE = 1e-3
# M2M100Tokenizer's default madeup words: ids after the language tokens that the tokenizer never produces.
M2M100_MADEUP_WORDS = 8


# --- tokenizers -----------------------------------------------------------------------------------

def train_spm(data_dir, seed, model_type):
    """A SentencePiece model with its default nmt_nfkc normalisation, as the hub models have."""
    import io
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(spm_lines(data_dir, ("en", "de"))), model_writer=model,
                                   model_type=model_type, vocab_size=SPM_VOCAB_SIZE, character_coverage=1.0,
                                   num_threads=1, minloglevel=2)
    return model.getvalue()


def m2m100_vocab(spm_bytes):
    """fairseq's dictionary as M2M-100's vocab.json has it: <s> <pad> </s> <unk>, then the SentencePiece pieces."""
    import sentencepiece as spm
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes)
    vocab = {"<s>": BOS, "<pad>": PAD, "</s>": EOS, "<unk>": UNK}
    for index in range(processor.get_piece_size()):
        vocab.setdefault(processor.id_to_piece(index), len(vocab))
    return vocab


def build_tokenizer(directory, spec, spm_bytes):
    """Writes the tokenizer files into directory (save_pretrained) and returns the loaded tokenizer."""
    import transformers
    staging = directory + ".tokenizer"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    with open(os.path.join(staging, "sentencepiece.bpe.model"), "wb") as spm_file:
        spm_file.write(spm_bytes)
    tokenizer_class = getattr(transformers, spec["tokenizer"])
    languages = dict(src_lang=spec["source"], tgt_lang=spec["target"])
    if spec["tokenizer"] == "M2M100Tokenizer":
        with open(os.path.join(staging, "vocab.json"), "w", encoding="utf-8") as vocab_file:
            json.dump(m2m100_vocab(spm_bytes), vocab_file, ensure_ascii=False, indent=0)
        tokenizer = tokenizer_class(vocab_file=os.path.join(staging, "vocab.json"),
                                    spm_file=os.path.join(staging, "sentencepiece.bpe.model"), **languages)
    elif spec["codes"]:
        tokenizer = tokenizer_class.from_pretrained(staging, extra_special_tokens=list(spec["codes"]), **languages)
    else:
        tokenizer = tokenizer_class.from_pretrained(staging, **languages)
    tokenizer.save_pretrained(directory)
    # The fast classes save only tokenizer.json; the hub also ships the SentencePiece model (seqtrans needs it).
    shutil.copy(os.path.join(staging, "sentencepiece.bpe.model"), directory)
    shutil.rmtree(staging)
    return tokenizer_class.from_pretrained(directory)


def model_vocab_size(tokenizer, spec):
    if spec["tokenizer"] == "M2M100Tokenizer":
        return tokenizer.vocab_size + len(tokenizer.lang_code_to_id) + M2M100_MADEUP_WORDS
    return len(tokenizer)


def language_id(tokenizer, code):
    if hasattr(tokenizer, "get_lang_id"):
        return tokenizer.get_lang_id(code)
    return tokenizer.convert_tokens_to_ids(code)


def encode_sources(tokenizer, texts, code):
    tokenizer.src_lang = code
    return [tokenizer(text)["input_ids"] for text in texts]


def encode_targets(tokenizer, texts, code):
    tokenizer.tgt_lang = code
    return [tokenizer(text_target=text)["input_ids"] for text in texts]


# --- the model ------------------------------------------------------------------------------------

def build_model(spec, vocab_size, seed):
    import torch
    import transformers
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab_size, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                  decoder_start_token_id=EOS, activation_function=spec["activation"], scale_embedding=True,
                  dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, tie_word_embeddings=True, **SHAPE)
    if spec["architecture"] == "MBartForConditionalGeneration":
        model = transformers.MBartForConditionalGeneration(transformers.MBartConfig(**common))
        with torch.no_grad():
            generator = torch.Generator().manual_seed(seed)
            model.final_logits_bias.copy_(LOGITS_BIAS_STD * torch.randn(model.final_logits_bias.shape,
                                                                        generator=generator))
        return model
    return transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**common))


def training_pairs(tokenizer, spec, data_dir):
    """en->de and de->en pairs of Multi30k train, each side with its language code."""
    english, german = [], []
    # Multi30k alone: short sentences teach EOS within the few hundred steps a 2-core machine affords.
    english += read_lines(data_dir, "multi30k/train.en")
    german += read_lines(data_dir, "multi30k/train.de")
    sources, targets = [], []
    for source_texts, source_code, target_texts, target_code in (
            (english, spec["source"], german, spec["target"]), (german, spec["target"], english, spec["source"])):
        sources += encode_sources(tokenizer, source_texts, source_code)
        targets += encode_targets(tokenizer, target_texts, target_code)
    keep = [i for i in range(len(sources)) if len(sources[i]) <= 120 and len(targets[i]) <= 120]
    return [sources[i] for i in keep], [targets[i] for i in keep]


def train_briefly(model, tokenizer, spec, data_dir, seed, steps):
    """AdamW steps on both directions (fp32, CPU, seeded); decoder input = [EOS] + labels[:-1] as HF shifts."""
    import torch
    import torch.nn.functional as F
    from train_demo import PairSet
    sources, targets = training_pairs(tokenizer, spec, data_dir)
    pairs = PairSet(sources, targets, PAD, "cpu")
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
        source, mask, decoder_input, labels = pairs.tensors(batch, EOS, PAD)
        logits = model(input_ids=source, attention_mask=mask, decoder_input_ids=decoder_input).logits
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100,
                               label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"make_family_goldens: step {step} loss {loss.item():.3f} ({time.time() - started:.0f}s)", flush=True)
    model.eval()


def continue_training(directory, name, data_dir, seed, steps):
    """More steps on an existing checkpoint (sharpening undone first, redone after): a model whose outputs
    rarely end can be trained further without repeating the first steps."""
    import torch
    import transformers
    spec = FAMILIES[name]
    tokenizer = getattr(transformers, spec["tokenizer"]).from_pretrained(directory)
    model = getattr(transformers, spec["architecture"]).from_pretrained(directory, dtype=torch.float32)
    final_norm = model.model.decoder.layer_norm
    with torch.no_grad():
        final_norm.weight.div_(SHARPEN)
        final_norm.bias.div_(SHARPEN)
    train_briefly(model, tokenizer, spec, data_dir, seed + 1, steps)
    with torch.no_grad():
        final_norm.weight.mul_(SHARPEN)
        final_norm.bias.mul_(SHARPEN)
    model.save_pretrained(directory)


def create_checkpoint(directory, name, data_dir, seed, steps):
    import torch
    from transformers import GenerationConfig
    spec = FAMILIES[name]
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    tokenizer = build_tokenizer(directory, spec, train_spm(data_dir, seed, spec["spm_type"]))
    model = build_model(spec, model_vocab_size(tokenizer, spec), seed)
    train_briefly(model, tokenizer, spec, data_dir, seed, steps)
    with torch.no_grad():
        model.model.decoder.layer_norm.weight.mul_(SHARPEN)
        model.model.decoder.layer_norm.bias.mul_(SHARPEN)
    # The hub's generation configs of these families: fairseq ids, no bad_words_ids.
    model.generation_config = GenerationConfig(bos_token_id=BOS, pad_token_id=PAD, eos_token_id=EOS,
                                               decoder_start_token_id=EOS, **spec["generation"])
    model.save_pretrained(directory)


# --- goldens --------------------------------------------------------------------------------------

def golden_inputs(count):
    """The first source lines of the Marian goldens: news, Multi30k, Tatoeba and odd lines."""
    path = os.path.join(REPO, "test", "data", "golden", "marian_tiny_greedy.tsv")
    with open(path, encoding="utf-8") as golden:
        lines = [row.split("\t")[0] for row in golden if not row.startswith("#")]
    return lines[:count]


def generation_config(num_beams, target_id):
    """HF's defaults for these families (no bad_words_ids: pad is not suppressed) plus the forced target code."""
    from transformers import GenerationConfig
    return GenerationConfig(num_beams=num_beams, do_sample=False, num_return_sequences=1, length_penalty=1.0,
                            early_stopping=False, max_new_tokens=MAX_NEW_TOKENS, min_length=0, bad_words_ids=None,
                            forced_bos_token_id=target_id, forced_eos_token_id=None, repetition_penalty=1.0,
                            no_repeat_ngram_size=0, renormalize_logits=False, decoder_start_token_id=EOS,
                            eos_token_id=EOS, pad_token_id=PAD, bos_token_id=BOS, output_scores=True,
                            output_logits=True, return_dict_in_generate=True, use_cache=True)


def run_generate(model, source_ids, config, device="cpu"):
    """(output ids without the decoder start and EOS, the forced target code first; finished; score; the
    smallest top-2 logit gap of the greedy steps after the forced one)."""
    import torch
    inputs = torch.tensor([source_ids], device=device)
    with torch.no_grad():
        result = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), generation_config=config)
    sequence = result.sequences[0].tolist()
    if sequence[0] != EOS or sequence[1] != config.forced_bos_token_id:
        raise RuntimeError(f"generate() did not start with EOS and the target code: {sequence[:3]}")
    sequence = sequence[1:]
    finished = len(sequence) > 1 and sequence[-1] == EOS
    gap = float("inf")
    if config.num_beams == 1:
        # As in make_golden.py: the sum of log_softmax(raw logits) over the chosen tokens, where a forced
        # token adds 0 (the forced-BOS processor leaves it the only choice; beam scores count it as 0 too).
        logits = torch.stack([step[0] for step in result.logits]).double().cpu()
        if logits.shape[0] != len(sequence):
            raise RuntimeError(f"greedy: {logits.shape[0]} logits for {len(sequence)} tokens")
        log_probs = torch.log_softmax(logits, dim=-1)[torch.arange(len(sequence)), torch.tensor(sequence)]
        log_probs[0] = 0.0
        score = float(log_probs.sum())
        if logits.shape[0] > 1:
            top = torch.topk(logits[1:], 2, dim=-1).values
            gap = float((top[:, 0] - top[:, 1]).min())
    else:
        score = float(result.sequences_scores[0])
    if finished:
        sequence = sequence[:-1]
    return sequence, finished, score, gap


def piece_lookup_ids(model_file, text):
    """Source ids the way the C++ tokenizer computes them from the converted file: SentencePiece pieces looked
    up in the piece list (unknown -> unk), the language code placed as the file says, EOS."""
    import sentencepiece as spm
    from seqtrans_file import pb, read_header
    header, _ = read_header(model_file)
    tokenizer = header.tokenizer
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.source_spm)
    index = {piece: model_id for model_id, piece in enumerate(tokenizer.source_vocab)}
    unk = header.config.unk_id
    codes = {entry.code: entry.id for entry in tokenizer.language_codes}
    return lambda line, code: _frame([index.get(piece, unk) for piece in processor.encode(line, out_type=str)],
                                     codes[code], header.config.eos_id,
                                     tokenizer.source_language == pb.SOURCE_SUFFIX)


def _frame(ids, code_id, eos_id, suffix):
    return ids + [eos_id, code_id] if suffix else [code_id] + ids + [eos_id]


def make_goldens(out_dir, name, args):
    import torch
    import transformers
    spec = FAMILIES[name]
    checkpoint = os.path.join(out_dir, name)
    golden = os.path.join(out_dir, "golden")
    os.makedirs(golden, exist_ok=True)
    tokenizer = getattr(transformers, spec["tokenizer"]).from_pretrained(checkpoint)
    model_class = getattr(transformers, spec["architecture"])
    model = model_class.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager").eval()
    inputs = golden_inputs(args.lines)
    source_ids = encode_sources(tokenizer, inputs, spec["source"])
    target_id = language_id(tokenizer, spec["target"])
    summaries = {}
    for label, num_beams in GOLDEN_SETS:
        config = generation_config(num_beams, target_id)
        started = time.time()
        rows, near_ties, min_gap = [], [], float("inf")
        for line_number, (text, ids) in enumerate(zip(inputs, source_ids), start=2):
            output, finished, score, gap = run_generate(model, ids, config)
            rows.append((text, ids, output, finished, score))
            min_gap = min(min_gap, gap)
            if gap < NEAR_TIE:
                near_ties.append((line_number, gap))
        # generate() fills what the passed config leaves unset from the model's own generation config, so
        # mBART-50's forced_eos_token_id (2) applies although the config above gives None: record what ran.
        forced_eos = config.forced_eos_token_id
        if forced_eos is None:
            forced_eos = getattr(model.generation_config, "forced_eos_token_id", None)
        settings = (f"model={name} num_beams={num_beams} do_sample=False length_penalty=1.0 early_stopping=False "
                    f"num_return_sequences=1 max_new_tokens={MAX_NEW_TOKENS} bad_words_ids=None "
                    f"forced_eos_token_id={forced_eos} min_length=0 repetition_penalty=1.0 no_repeat_ngram_size=0 "
                    f"target_prefixes=none source_lang={spec['source']} target_lang={spec['target']} "
                    f"forced_bos_token_id={target_id} decoder_start_id={EOS} eos_id={EOS} pad_id={PAD} "
                    f"batch_size=1 dtype=float32 device=cpu "
                    f"score={'sequences_scores' if num_beams > 1 else 'sum(log_softmax(raw logits)), forced code 0'} "
                    f"columns=source_text,source_ids,output_ids,finished,score")
        write_tsv(os.path.join(golden, f"{name}_{label}.tsv"), settings, rows)
        lengths = sorted(len(row[2]) for row in rows)
        summaries[label] = dict(num_beams=num_beams, seconds=time.time() - started, total=len(rows),
                                finished=sum(row[3] for row in rows), min_gap=min_gap, near_ties=near_ties,
                                at_limit=sum(at_limit(row, MAX_NEW_TOKENS) for row in rows),
                                pad_outputs=sum(PAD in row[2] for row in rows),
                                lengths=(lengths[0], lengths[len(lengths) // 2], lengths[-1]))
        print(f"make_family_goldens: {name} {label}: "
              f"{ {key: value for key, value in summaries[label].items() if key != 'near_ties'} }", flush=True)
    try:
        agreement = check_piece_lookup(checkpoint, name, inputs, source_ids, spec["source"])
    except Exception as error:  # the goldens stay useful; the summary says the check did not run
        print(f"make_family_goldens: {name}: piece-list check failed: {error}", flush=True)
        agreement = (None, [])
    write_summary(golden, name, args, inputs, source_ids, summaries, agreement)


def check_piece_lookup(checkpoint, name, inputs, source_ids, source_code):
    """Converts the checkpoint and counts the lines whose piece-list ids equal HF's source ids."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as temporary:
        model_file = os.path.join(temporary, f"{name}.seqtrans")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "convert_hf.py"), checkpoint, model_file],
                       check=True, stdout=subprocess.DEVNULL)
        encode = piece_lookup_ids(model_file, None)
        mismatches = [(line, text) for line, (text, ids) in enumerate(zip(inputs, source_ids), start=2)
                      if encode(text, source_code) != list(ids)]
    print(f"make_family_goldens: {name}: piece-list ids equal HF's on {len(inputs) - len(mismatches)} of "
          f"{len(inputs)} lines" + (f"; differ on lines {[line for line, _ in mismatches]}" if mismatches else ""))
    return len(inputs) - len(mismatches), mismatches


def write_summary(golden, name, args, inputs, source_ids, summaries, agreement):
    import sentencepiece
    import torch
    import transformers
    spec = FAMILIES[name]
    lengths = sorted(map(len, source_ids))
    agreeing, mismatches = agreement
    lines = [
        f"# {name}: Hugging Face generate() goldens", "",
        f"Made by `scripts/make_family_goldens.py test/data --models {name}` (seed {args.seed})"
        + (f", then `--reuse --more-steps {args.more_steps}`" if args.more_steps else "") + " with transformers "
        f"{transformers.__version__}, torch {torch.__version__}, sentencepiece {sentencepiece.__version__}, Python "
        f"{platform.python_version()}, on the CPU in fp32, {time.strftime('%Y-%m-%d')}.", "",
        f"## The model: `test/data/{name}/`", "",
        f"A small `{spec['architecture']}` saved with `save_pretrained` plus the files `{spec['tokenizer']}` saves "
        f"and `sentencepiece.bpe.model` (SentencePiece {spec['spm_type']}, {SPM_VOCAB_SIZE} pieces, nmt_nfkc, "
        "trained on 7,000 lines of Multi30k train and newstest2013, English and German). Shape: "
        + ", ".join(f"{key}={value}" for key, value in SHAPE.items())
        + f", activation {spec['activation']}, scale_embedding, tied embeddings. generation_config.json: "
        + ", ".join(f"{key}={value}" for key, value in spec["generation"].items())
        + f". Trained {args.steps} AdamW steps (lr {TRAIN_LR}, {TRAIN_MAX_TOKENS}-token batches) on Multi30k train "
        "in both directions" + (f", then {args.more_steps} more (seed {args.seed + 1}, a new optimizer and "
                                "schedule; `--reuse --more-steps`)" if args.more_steps else "")
        + f", then the decoder's final layer norm x {SHARPEN}" + (f"; `final_logits_bias` is a fixed N(0, {LOGITS_BIAS_STD}) draw" if "MBart" in
                        spec["architecture"] else "") + ". The translations are poor; only the exact computation "
        f"matters. Convert it with `scripts/convert_hf.py test/data/{name} OUT.seqtrans`.", "",
        f"Inputs: the first {len(inputs)} source lines of `marian_tiny_greedy.tsv`, {lengths[0]} to {lengths[-1]} "
        f"source ids with HF's tokenizer (`src_lang={spec['source']}`: the code first, EOS last). Outputs: "
        f"`forced_bos_token_id` = the id of `{spec['target']}`, so each output starts with that id (the decoder "
        "start, EOS, is left out as in the Marian goldens); no `bad_words_ids` (HF suppresses nothing here).", "",
        ("Piece-list check: not run (the conversion failed)." if agreeing is None else
         f"Piece-list check: the converted file's piece list gives HF's source ids on {agreeing} of {len(inputs)} "
        "lines (SentencePiece pieces looked up by text, unknown -> unk, code and EOS placed as the file says)"
         + ("." if not mismatches else "; differing lines: " + ", ".join(str(line) for line, _ in mismatches) + ".")),
        "", "## Golden sets", "",
        "| file | num_beams | max_new_tokens | finished with EOS | at the limit | output length min / median / max "
        "(code included) | outputs with pad | smallest top-2 gap (greedy) | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, summary in summaries.items():
        gap = f"{summary['min_gap']:.4f}" if summary["min_gap"] != float("inf") else "-"
        lines.append(f"| `{name}_{label}.tsv` | {summary['num_beams']} | {MAX_NEW_TOKENS} | {summary['finished']} of "
                     f"{summary['total']} | {summary['at_limit']} of {summary['total']} | "
                     f"{' / '.join(map(str, summary['lengths']))} | {summary['pad_outputs']} | {gap} | "
                     f"{summary['seconds']:.0f} s |")
    lines += ["", f"Near-ties (greedy, file line numbers, top-2 logit gap below {NEAR_TIE:g}): "
              + (", ".join(f"{line} ({gap:.1e})" for line, gap in summaries["greedy"]["near_ties"]) or "none") + ".",
              "", f"Regenerate the goldens only: `scripts/make_family_goldens.py test/data --models {name} --reuse`.", ""]
    with open(os.path.join(golden, f"{name}.md"), "w", encoding="utf-8") as summary_file:
        summary_file.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="writes OUT_DIR/NAME and OUT_DIR/golden")
    parser.add_argument("--models", default=",".join(FAMILIES), help="comma-separated: " + ", ".join(FAMILIES))
    parser.add_argument("--data", default=default_data_dir(), help="data directory (multi30k/, wmt-newstest-en-de/; "
                        "default $SEQTRANS_DATA, else .data/; see docs/DATA.md)")
    parser.add_argument("--steps", type=int, default=200, help="training steps per model")
    parser.add_argument("--lines", type=int, default=100, help="golden inputs per set")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--reuse", action="store_true", help="keep existing checkpoints; make only the goldens")
    parser.add_argument("--more-steps", type=int, default=0, help="with --reuse: train the existing checkpoints "
                        "this many steps more (seed + 1) before making the goldens")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [name for name in names if name not in FAMILIES]
    if unknown:
        sys.exit(f"make_family_goldens: error: unknown model {unknown[0]} (known: {', '.join(FAMILIES)})")
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    for name in names:
        started = time.time()
        if not args.reuse:
            create_checkpoint(os.path.join(args.out_dir, name), name, args.data, args.seed, args.steps)
        elif args.more_steps:
            continue_training(os.path.join(args.out_dir, name), name, args.data, args.seed, args.more_steps)
        make_goldens(args.out_dir, name, args)
        print(f"make_family_goldens: {name} done in {time.time() - started:.0f}s", flush=True)


if __name__ == "__main__":
    main()
