#!/usr/bin/env python3
"""Trains the bundled English->German demo model (Marian architecture) from scratch with HF transformers.

Usage: train_demo.py --out DIR [--data DIR] [--minutes 7] [--preset demo|tiny] [...]

Data: Multi30k train (oversampled) + Tatoeba en-de for training, Multi30k val for validation loss,
Multi30k test_2016_flickr for BLEU. A joint SentencePiece unigram vocabulary is trained on the
training text and mapped to model ids OPUS-MT style (vocab.json: </s>=0, <unk>=1, pieces, <pad> last).
Training stops after --minutes of wall-clock time (learning rate: linear warmup, then linear decay
to zero over the time budget), then the model is evaluated with HF generate() (beam 4 and greedy)
and saved as an HF checkpoint directory (save_pretrained + source.spm/target.spm + vocab.json).

Writes to --out: checkpoint/, metrics.json, test.hf_beam4.de, test.hf_greedy.de, test.hf_beam4_fp16.de.
"""
import argparse
import io
import json
import os
import platform
import random
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRESETS = {
    # ~10M parameters: about 20 MB as fp16 after conversion.
    "demo": dict(model=dict(d_model=256, encoder_layers=6, decoder_layers=3, encoder_attention_heads=4,
                            decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024),
                 spm_vocab=8000, max_tokens=20000, lr=7e-4, warmup=500, dropout=0.3),
    # For checking the pipeline on a CPU in seconds.
    "tiny": dict(model=dict(d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
                 spm_vocab=1000, max_tokens=2000, lr=2e-3, warmup=20, dropout=0.1),
}
MAX_LENGTH = 100          # ids per side, EOS included; longer pairs are dropped
MAX_LENGTH_RATIO = 3.0    # drop pairs whose lengths differ more than this (misaligned Tatoeba lines)


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def default_data_dir():
    """$SEQTRANS_DATA, else .data/ in the repository (docs/DATA.md: layout and where to get the corpora)."""
    return os.environ.get("SEQTRANS_DATA", os.path.join(REPO, ".data"))


def read_pairs(data_dir, stem):
    pairs = []
    for side in ("en", "de"):
        path = os.path.join(data_dir, f"{stem}.{side}")
        if not os.path.isfile(path):
            sys.exit(f"train_demo: error: {path}: file not found (pass --data DIR; docs/DATA.md says where to get it)")
        with open(path, encoding="utf-8") as text_file:
            pairs.append([" ".join(line.split()) for line in text_file])
    if len(pairs[0]) != len(pairs[1]):
        sys.exit(f"train_demo: error: {stem}.en and {stem}.de differ in line count")
    return pairs[0], pairs[1]


# --- vocabulary -----------------------------------------------------------------------------------

def train_spm(lines, vocab_size, seed):
    import sentencepiece as spm
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   vocab_size=vocab_size, character_coverage=1.0, input_sentence_size=2000000,
                                   shuffle_input_sentence=True, num_threads=os.cpu_count() or 1,
                                   minloglevel=2)
    return model.getvalue()


class Vocabulary:
    """OPUS-MT-style model ids over a SentencePiece model: </s>=0, <unk>=1, other pieces, <pad> last."""

    def __init__(self, spm_bytes):
        import sentencepiece as spm
        self.processor = spm.SentencePieceProcessor(model_proto=spm_bytes)
        pieces = [self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size())]
        ordinary = [piece for piece in pieces if piece not in ("<unk>", "<s>", "</s>", "<pad>")]
        self.pieces = ["</s>", "<unk>"] + ordinary + ["<pad>"]
        self.ids = {piece: index for index, piece in enumerate(self.pieces)}
        self.eos_id, self.unk_id, self.pad_id = 0, 1, len(self.pieces) - 1
        # SentencePiece id -> model id; control pieces never come out of encode() except <unk>.
        self.from_spm = np.array([self.ids.get(piece, self.unk_id) for piece in pieces], dtype=np.int32)

    def __len__(self):
        return len(self.pieces)

    def encode(self, lines):
        """Model ids with EOS appended, one int32 array per line."""
        encoded = self.processor.encode(lines, num_threads=os.cpu_count() or 1)
        return [np.append(self.from_spm[np.asarray(ids, dtype=np.int64)], self.eos_id).astype(np.int32)
                if ids else np.array([self.eos_id], dtype=np.int32) for ids in encoded]


# --- batching -------------------------------------------------------------------------------------

def token_budget_batches(indices, widths, max_tokens, rng):
    """Splits indices into batches of similar widths (ties broken at random), each of at most max_tokens padded
    ids (count x widest), in random order."""
    sort = np.lexsort((rng.random(len(indices)), widths))
    order, widths = indices[sort], widths[sort]
    batches = []
    start = 0
    while start < len(order):
        # widths never decrease, so (end - start) * widths[end - 1] grows with end: binary search.
        low, high = start + 1, len(order)
        while low < high:
            middle = (low + high + 1) // 2
            if (middle - start) * widths[middle - 1] <= max_tokens:
                low = middle
            else:
                high = middle - 1
        batches.append(order[start:low])
        start = low
    rng.shuffle(batches)
    return batches


class PairSet:
    """Tokenized pairs as padded id matrices (on the training device) plus lengths on the host."""

    def __init__(self, sources, targets, pad_id, device):
        import torch
        self.source_lengths = np.array([len(ids) for ids in sources], dtype=np.int64)
        self.target_lengths = np.array([len(ids) for ids in targets], dtype=np.int64)
        self.sources = torch.from_numpy(self._pad(sources, pad_id)).to(device)
        self.targets = torch.from_numpy(self._pad(targets, pad_id)).to(device)
        self.device = device

    @staticmethod
    def _pad(sequences, pad_id):
        matrix = np.full((len(sequences), max(len(ids) for ids in sequences)), pad_id, dtype=np.int64)
        for row, ids in enumerate(sequences):
            matrix[row, :len(ids)] = ids
        return matrix

    def __len__(self):
        return len(self.source_lengths)

    def batches(self, indices, max_tokens, rng):
        """Splits indices into length-sorted batches of at most max_tokens padded ids per side."""
        longest = np.maximum(self.source_lengths[indices], self.target_lengths[indices])
        return token_budget_batches(indices, longest, max_tokens, rng)

    def tensors(self, batch, start_id, pad_id):
        """(source ids, source mask, decoder input ids, labels with -100 on padding), shapes [B, L]."""
        import torch
        rows = torch.from_numpy(batch).to(self.device, non_blocking=True)
        source = self.sources[rows, :int(self.source_lengths[batch].max())]
        target = self.targets[rows, :int(self.target_lengths[batch].max())]
        start = torch.full((len(batch), 1), start_id, dtype=target.dtype, device=self.device)
        decoder_input = torch.cat([start, target[:, :-1]], dim=1)
        labels = target.masked_fill(target == pad_id, -100)
        return source, source != pad_id, decoder_input, labels


# --- training -------------------------------------------------------------------------------------

def build_model(preset, vocab, args):
    from transformers import MarianConfig, MarianMTModel
    config = MarianConfig(vocab_size=len(vocab), decoder_vocab_size=len(vocab), max_position_embeddings=512,
                          activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
                          tie_word_embeddings=True, dropout=args.dropout, attention_dropout=0.1,
                          activation_dropout=0.0, pad_token_id=vocab.pad_id, eos_token_id=vocab.eos_id,
                          decoder_start_token_id=vocab.pad_id, forced_eos_token_id=None, bos_token_id=None,
                          **preset["model"])
    return MarianMTModel(config)


def loss_on(model, batch_tensors, label_smoothing):
    import torch.nn.functional as F
    source, mask, decoder_input, labels = batch_tensors
    logits = model(input_ids=source, attention_mask=mask, decoder_input_ids=decoder_input, use_cache=False).logits
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100,
                           label_smoothing=label_smoothing)


def validation_loss(model, pairs, batches, vocab, autocast):
    import torch
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad(), autocast():
        for batch in batches:
            batch_tensors = pairs.tensors(batch, vocab.pad_id, vocab.pad_id)
            count = int(pairs.target_lengths[batch].sum())
            total += float(loss_on(model, batch_tensors, 0.0)) * count
            tokens += count
    model.train()
    return total / tokens


def train(model, train_pairs, m30k_count, val_pairs, vocab, preset, args, device):
    import torch
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device == "cuda" else \
        (lambda: torch.autocast("cpu", enabled=False))
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "layer_norm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98),
                                  eps=1e-8, fused=device == "cuda")
    rng = np.random.default_rng(args.seed)
    val_batches = val_pairs.batches(np.arange(len(val_pairs)), preset["max_tokens"], rng)
    m30k = np.arange(m30k_count)
    tatoeba = np.arange(m30k_count, len(train_pairs))
    budget = args.minutes * 60.0
    model.train()
    step, epoch, target_tokens = 0, 0, 0
    history = []
    best = (float("inf"), None, 0)
    started = time.time()
    last_log = last_val = started
    done = False
    while not done:
        # One epoch: Tatoeba once, Multi30k `upsample` times; each sub-epoch holds one copy of Multi30k
        # so that no batch contains the same pair twice.
        epoch += 1
        parts = np.array_split(rng.permutation(tatoeba), args.upsample)
        for part in parts:
            for batch in train_pairs.batches(np.concatenate([m30k, part]), preset["max_tokens"], rng):
                elapsed = time.time() - started
                if elapsed >= budget:
                    done = True
                    break
                lr = args.lr * min(1.0, (step + 1) / preset["warmup"]) * max(0.0, 1.0 - elapsed / budget)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                with autocast():
                    loss = loss_on(model, train_pairs.tensors(batch, vocab.pad_id, vocab.pad_id),
                                   args.label_smoothing)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                step += 1
                target_tokens += int(train_pairs.target_lengths[batch].sum())
                now = time.time()
                if now - last_log >= args.log_seconds:
                    log(f"step {step} epoch {epoch} loss {loss.item():.3f} lr {lr:.2e} "
                        f"{target_tokens / (now - started):,.0f} target tok/s elapsed {now - started:.0f}s")
                    last_log = now
                if now - last_val >= args.val_seconds:
                    val = validation_loss(model, val_pairs, val_batches, vocab, autocast)
                    history.append({"step": step, "seconds": round(now - started, 1), "val_loss": round(val, 4)})
                    log(f"step {step}: validation loss {val:.4f}")
                    if val < best[0]:
                        best = (val, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
                    last_val = time.time()
            if done:
                break
    train_seconds = time.time() - started
    final_val = validation_loss(model, val_pairs, val_batches, vocab, autocast)
    history.append({"step": step, "seconds": round(train_seconds, 1), "val_loss": round(final_val, 4)})
    memory = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if device == "cuda" else ""
    log(f"training stopped after {train_seconds:.0f}s: {step} steps, {epoch} epochs, "
        f"{target_tokens:,} target tokens; final validation loss {final_val:.4f}{memory}")
    used = "final"
    # The learning rate ends at zero, so the final weights are normally the best; fall back to the
    # best validation snapshot only if the run clearly over-fitted.
    if best[1] is not None and final_val > best[0] * 1.05:
        model.load_state_dict(best[1])
        used = f"best validation snapshot (step {best[2]}, loss {best[0]:.4f})"
        log(f"using the {used}")
    return dict(steps=step, epochs=epoch, train_seconds=round(train_seconds, 1), target_tokens=target_tokens,
                final_val_loss=round(final_val, 4), weights_used=used, val_history=history)


# --- evaluation -----------------------------------------------------------------------------------

def translate(model, tokenizer, lines, num_beams, device, batch_sentences):
    import torch
    pad_id, eos_id = model.config.pad_token_id, model.config.eos_token_id
    encoded = [tokenizer(line)["input_ids"] for line in lines]
    order = sorted(range(len(lines)), key=lambda i: len(encoded[i]))
    outputs = [None] * len(lines)
    for start in range(0, len(order), batch_sentences):
        chunk = order[start:start + batch_sentences]
        width = max(len(encoded[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        for row, i in enumerate(chunk):
            ids[row, :len(encoded[i])] = torch.tensor(encoded[i])
        ids = ids.to(device)
        with torch.no_grad():
            generated = model.generate(input_ids=ids, attention_mask=ids != pad_id, num_beams=num_beams,
                                       do_sample=False, length_penalty=1.0, early_stopping=False,
                                       max_new_tokens=min(256, 2 * width + 10), bad_words_ids=[[pad_id]],
                                       decoder_start_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
        for row, i in enumerate(chunk):
            outputs[i] = tokenizer.decode(generated[row], skip_special_tokens=True)
    return outputs


def evaluate(checkpoint, test_sources, test_references, device, out_dir, batch_sentences):
    import torch
    import sacrebleu
    from transformers import MarianMTModel, MarianTokenizer
    tokenizer = MarianTokenizer.from_pretrained(checkpoint)
    results = {}
    for label, num_beams, dtype in (("hf_beam4", 4, torch.float32), ("hf_greedy", 1, torch.float32),
                                    ("hf_beam4_fp16", 4, torch.float16)):
        if dtype == torch.float16 and device != "cuda":
            continue
        model = MarianMTModel.from_pretrained(checkpoint, dtype=dtype).to(device).eval()
        started = time.time()
        hypotheses = translate(model, tokenizer, test_sources, num_beams, device, batch_sentences)
        seconds = time.time() - started
        metric = sacrebleu.BLEU()
        bleu = metric.corpus_score(hypotheses, [test_references])
        with open(os.path.join(out_dir, f"test.{label}.de"), "w", encoding="utf-8") as output:
            output.write("\n".join(hypotheses) + "\n")
        results[label] = {"bleu": round(bleu.score, 2), "detail": bleu.format(), "seconds": round(seconds, 1)}
        results["sacrebleu_signature"] = str(metric.get_signature())
        log(f"{label}: {bleu.format()} ({seconds:.1f}s)")
    return results


def save_checkpoint(model, vocab, spm_bytes, directory):
    from transformers import GenerationConfig
    model.generation_config = GenerationConfig(decoder_start_token_id=vocab.pad_id, eos_token_id=vocab.eos_id,
                                               pad_token_id=vocab.pad_id, bad_words_ids=[[vocab.pad_id]],
                                               num_beams=4, max_length=512, forced_eos_token_id=None)
    model.save_pretrained(directory)
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(directory, name), "wb") as spm_file:
            spm_file.write(spm_bytes)
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as vocab_file:
        json.dump(vocab.ids, vocab_file, ensure_ascii=False, indent=0)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as config_file:
        json.dump({"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
                   "separate_vocabs": False, "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>",
                   "model_max_length": 512}, config_file, indent=2)


# --- main -----------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--data", default=default_data_dir(),
                        help="data directory with multi30k/ and tatoeba-manythings-en-de/ (default $SEQTRANS_DATA, "
                        "else .data/; see docs/DATA.md)")
    parser.add_argument("--minutes", type=float, default=7.0, help="wall-clock training budget")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--spm", help="reuse this SentencePiece model instead of training one")
    parser.add_argument("--upsample", type=int, default=3, help="Multi30k copies per epoch")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: per preset)")
    parser.add_argument("--dropout", type=float, help="dropout (default: per preset)")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-train-pairs", type=int, default=0, help="limit Tatoeba pairs (quick checks)")
    parser.add_argument("--eval-lines", type=int, default=0, help="evaluate on the first N test lines only")
    parser.add_argument("--log-seconds", type=float, default=15.0)
    parser.add_argument("--val-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    preset = PRESETS[args.preset]
    args.lr = args.lr or preset["lr"]
    args.dropout = preset["dropout"] if args.dropout is None else args.dropout
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device
    device = "cpu" if device == "auto" else device
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    wall_started = time.time()

    m30k_en, m30k_de = read_pairs(args.data, "multi30k/train")
    tatoeba_en, tatoeba_de = read_pairs(args.data, "tatoeba-manythings-en-de/tatoeba")
    val_en, val_de = read_pairs(args.data, "multi30k/val")
    test_en, test_de = read_pairs(args.data, "multi30k/test_2016_flickr")
    # Tatoeba is sorted by length: shuffle before use (and before taking a subset).
    order = np.random.default_rng(args.seed).permutation(len(tatoeba_en))
    if args.max_train_pairs:
        order = order[:args.max_train_pairs]
        m30k_en, m30k_de = m30k_en[:args.max_train_pairs], m30k_de[:args.max_train_pairs]
    tatoeba_en = [tatoeba_en[i] for i in order]
    tatoeba_de = [tatoeba_de[i] for i in order]
    if args.eval_lines:
        test_en, test_de = test_en[:args.eval_lines], test_de[:args.eval_lines]

    if args.spm:
        with open(args.spm, "rb") as spm_file:
            spm_bytes = spm_file.read()
    else:
        spm_bytes = train_spm(m30k_en + m30k_de + tatoeba_en + tatoeba_de, preset["spm_vocab"], args.seed)
    vocab = Vocabulary(spm_bytes)
    log(f"vocabulary: {len(vocab)} model ids ({time.time() - wall_started:.0f}s)")

    sources = vocab.encode(m30k_en + tatoeba_en)
    targets = vocab.encode(m30k_de + tatoeba_de)
    keep = [i for i, (s, t) in enumerate(zip(sources, targets))
            if len(s) <= MAX_LENGTH and len(t) <= MAX_LENGTH
            and max(len(s), len(t)) <= MAX_LENGTH_RATIO * min(len(s), len(t)) + 3]
    m30k_count = sum(1 for i in keep if i < len(m30k_en))
    train_pairs = PairSet([sources[i] for i in keep], [targets[i] for i in keep], vocab.pad_id, device)
    val_pairs = PairSet(vocab.encode(val_en), vocab.encode(val_de), vocab.pad_id, device)
    log(f"training pairs: {m30k_count} Multi30k (x{args.upsample}) + {len(train_pairs) - m30k_count} Tatoeba "
        f"(dropped {len(sources) - len(keep)}); {int(train_pairs.target_lengths.sum()):,} target ids once; "
        f"setup {time.time() - wall_started:.0f}s")

    model = build_model(preset, vocab, args).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    log(f"model: {parameters:,} parameters, {preset['model']}, device {device}")
    training = train(model, train_pairs, m30k_count, val_pairs, vocab, preset, args, device)

    checkpoint = os.path.join(args.out, "checkpoint")
    save_checkpoint(model.float(), vocab, spm_bytes, checkpoint)
    del model, train_pairs
    if device == "cuda":
        torch.cuda.empty_cache()
    results = evaluate(checkpoint, test_en, test_de, device, args.out, 200 if device == "cuda" else 50)

    metrics = {
        "model": {"architecture": "MarianMTModel (post-norm, swish, sinusoidal positions, shared + tied embeddings)",
                  "parameters": parameters, "vocab_size": len(vocab), **preset["model"]},
        "data": {"multi30k_train_pairs": m30k_count, "tatoeba_pairs": len(keep) - m30k_count,
                 "multi30k_upsample": args.upsample, "max_length": MAX_LENGTH},
        "hyperparameters": {"minutes": args.minutes, "max_tokens_per_batch": preset["max_tokens"], "lr": args.lr,
                            "warmup_steps": preset["warmup"], "schedule": "linear warmup, linear decay to 0 over the "
                            "time budget", "optimizer": "AdamW(0.9, 0.98), eps 1e-8, grad clip 1.0",
                            "weight_decay": args.weight_decay, "dropout": args.dropout, "attention_dropout": 0.1,
                            "label_smoothing": args.label_smoothing, "autocast": "bf16" if device == "cuda" else "off",
                            "seed": args.seed, "spm": f"unigram {preset['spm_vocab']}, joint en+de"},
        "training": training,
        "test_2016_flickr": {"lines": len(test_en), **results},
        "environment": {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
                        "torch": torch.__version__, "transformers": transformers.__version__,
                        "python": platform.python_version()},
        "total_seconds": round(time.time() - wall_started, 1),
    }
    with open(os.path.join(args.out, "metrics.json"), "w") as metrics_file:
        json.dump(metrics, metrics_file, indent=2)
    log(f"done in {metrics['total_seconds']:.0f}s; wrote {args.out}")


if __name__ == "__main__":
    main()
