#!/usr/bin/env python3
"""Trains the bundled decoder-only English->German demo model (a small LlamaForCausalLM) as a prompted translator.

Usage: train_llama_demo.py DATA_DIR OUT_DIR [--device auto|cpu|cuda] [--minutes M] [--seqtrans BUILD/seqtrans]
                           [--smoke] [--reuse]

DATA_DIR holds multi30k/{train,val,test_2016_flickr}.{en,de} and tatoeba-manythings-en-de/tatoeba.{en,de}
(docs/DATA.md). Training text: Multi30k train (oversampled) and Tatoeba; Multi30k val gives the validation loss,
test_2016_flickr the BLEU scores (never trained on).

Steps: a SentencePiece model as Llama's (BPE, byte fallback, 8,000 pieces) on the training text of both languages;
a LlamaForCausalLM of 6.5 million parameters trained for --minutes of wall clock (AdamW, warm-up then cosine
decay) on "English: {src}\\nGerman:" + " {tgt}</s>", the loss on the German side only; saved hub-style in
OUT_DIR/hf/; converted (scripts/convert_hf.py, fp16) to OUT_DIR/llama-demo-en-de.seqtrans; evaluated with HF
generate() (fp32, greedy and beam 4, max_new_tokens 128) and, with --seqtrans, with `seqtrans translate
--prompt-template` on the CPU and the GPU, beside the bundled encoder-decoder demo (models/opus-demo-en-de.seqtrans)
on the same test set. Writes OUT_DIR/results.json and the model card OUT_DIR/README-llama-demo.md; prints the
commands that copy the files to commit into models/.

--smoke: a tiny model, a few hundred training pairs, 20 steps and 20 test lines, to check every stage on a CPU.
--reuse: keep OUT_DIR/hf and the training record of OUT_DIR/results.json; convert and evaluate again.
"""
import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama_goldens import (BOS, EOS, PROMPT, build_model, build_tokenizer, convert,  # noqa: E402
                                prompted_sequences, train_llama_spm)
from train_demo import MAX_LENGTH, MAX_LENGTH_RATIO, log, read_pairs, token_budget_batches  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_NAME = "llama-demo-en-de"
ENCODER_DECODER_DEMO = os.path.join(REPO, "models", "opus-demo-en-de.seqtrans")
ROPE_THETA = 10000.0
MAX_NEW_TOKENS = 128
SEARCHES = [("greedy", 1), ("beam4", 4)]
# The files of OUT_DIR that the repository keeps, and where.
COMMITTED = {"llama-demo-en-de.seqtrans": "models/llama-demo-en-de.seqtrans",
             "prompt-template.txt": "models/llama-demo-en-de.prompt.txt",
             "README-llama-demo.md": "models/README-llama-demo.md"}

PRESETS = {
    # 6.5 M parameters, 13 MB as fp16. Tied embeddings: an untied 8,000 x 256 output layer would add 2 M
    # parameters (the file would pass 16 MiB) and learn only from the German side; tied, every row also
    # learns from the English prompts. Grouped-query attention (8 query heads, 4 key/value heads) as Llama-2 70B.
    "demo": dict(shape=dict(hidden_size=256, intermediate_size=704, num_hidden_layers=6, num_attention_heads=8,
                            num_key_value_heads=4, max_position_embeddings=512, rms_norm_eps=1e-5,
                            hidden_act="silu", tie_word_embeddings=True),
                 # Dropout 0.2: ~25 epochs in 4 minutes on an H100 are ~75 passes over Multi30k.
                 spm_vocab=8000, max_tokens=32768, lr=1.5e-3, warmup=300, dropout=0.2),
    # Every stage on a CPU in a minute.
    "smoke": dict(shape=dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
                             hidden_act="silu", tie_word_embeddings=True),
                  spm_vocab=600, max_tokens=2048, lr=3e-3, warmup=5, dropout=0.1,
                  train_lines=300, val_lines=50, test_lines=20, steps=20),
}


# --- data -----------------------------------------------------------------------------------------

DATA_FILES = [f"{stem}.{language}" for stem in ("multi30k/train", "multi30k/val", "multi30k/test_2016_flickr",
                                                "tatoeba-manythings-en-de/tatoeba") for language in ("en", "de")]


def check_data(data_dir):
    """Stops at once, naming the first missing file, rather than after the tokenizer or the training."""
    for name in DATA_FILES:
        if not os.path.isfile(os.path.join(data_dir, name)):
            sys.exit(f"train_llama_demo: error: {os.path.join(data_dir, name)}: file not found (DATA_DIR's layout: "
                     "docs/DATA.md)")


def read_corpora(data_dir, preset, seed):
    """The training pairs (Multi30k train, then Tatoeba shuffled: its file is sorted by length), val and test."""
    m30k = read_pairs(data_dir, "multi30k/train")
    tatoeba = read_pairs(data_dir, "tatoeba-manythings-en-de/tatoeba")
    val = read_pairs(data_dir, "multi30k/val")
    test = read_pairs(data_dir, "multi30k/test_2016_flickr")
    order = np.random.default_rng(seed).permutation(len(tatoeba[0]))
    tatoeba = ([tatoeba[0][i] for i in order], [tatoeba[1][i] for i in order])
    if "train_lines" in preset:
        m30k, tatoeba = (cut(pair, preset["train_lines"]) for pair in (m30k, tatoeba))
        val, test = cut(val, preset["val_lines"]), cut(test, preset["test_lines"])
    return m30k, tatoeba, val, test


def cut(pair, count):
    return pair[0][:count], pair[1][:count]


class SequenceSet:
    """Prompted sequences as one padded id matrix on the training device, lengths and loss starts on the host."""

    def __init__(self, sequences, device):
        import torch
        self.lengths = np.array([len(ids) for ids, _ in sequences], dtype=np.int64)
        self.firsts = np.array([first for _, first in sequences], dtype=np.int64)
        matrix = np.full((len(sequences), int(self.lengths.max())), EOS, dtype=np.int32)
        for row, (ids, _) in enumerate(sequences):
            matrix[row, :len(ids)] = ids
        self.ids = torch.from_numpy(matrix).to(device)
        self.device = device

    def __len__(self):
        return len(self.lengths)

    def tensors(self, batch):
        """(input ids [B, W], flat indices of the positions that predict a German token or EOS, those tokens).
        Padding goes on the right, where causal attention keeps it out of every real position: no mask needed.
        The indices come from the host so that a step never waits for the GPU."""
        import torch
        width = int(self.lengths[batch].max())
        positions = np.arange(width)[None, :]
        predicts = (positions >= self.firsts[batch, None] - 1) & (positions <= self.lengths[batch, None] - 2)
        flat = torch.from_numpy(np.flatnonzero(predicts)).to(self.device, non_blocking=True)
        rows = torch.from_numpy(batch).to(self.device, non_blocking=True)
        inputs = self.ids[rows, :width].long()
        return inputs, flat, inputs.view(-1)[flat + 1]

    def target_tokens(self, batch):
        return int((self.lengths[batch] - self.firsts[batch]).sum())


def encode_pairs(tokenizer, english, german):
    """prompted_sequences, less pairs with more than MAX_LENGTH ids on a side or sides whose lengths differ more
    than MAX_LENGTH_RATIO times (misaligned Tatoeba lines), as for the encoder-decoder demo."""
    overhead = len(tokenizer(PROMPT.format(source=""))["input_ids"])
    kept = []
    for ids, first in prompted_sequences(tokenizer, english, german, 2 * MAX_LENGTH + overhead + 1):
        source, target = first - overhead, len(ids) - first
        if source <= MAX_LENGTH and target <= MAX_LENGTH and \
                max(source, target) <= MAX_LENGTH_RATIO * min(source, target) + 3:
            kept.append((ids, first))
    return kept


# --- training -------------------------------------------------------------------------------------

def add_residual_dropout(model, probability):
    """Dropout on what each attention and feed-forward block adds to the residual stream, while training. Llama's
    config has no such dropout (its pre-training data is never repeated), but this model sees its data dozens of times;
    hooks leave the saved model a plain LlamaForCausalLM."""
    import torch.nn.functional as F

    def drop(module, inputs, output):
        return F.dropout(output, probability, module.training)
    return [module.register_forward_hook(drop) for layer in model.model.layers
            for module in (layer.self_attn.o_proj, layer.mlp.down_proj)]


def loss_on(model, tensors, label_smoothing):
    """Mean cross-entropy of the German tokens and EOS; the output layer runs on those positions only."""
    import torch.nn.functional as F
    inputs, flat, targets = tensors
    hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state
    logits = model.lm_head(hidden.reshape(-1, hidden.shape[-1])[flat])
    return F.cross_entropy(logits.float(), targets, label_smoothing=label_smoothing)


def validation_loss(model, sequences, batches, autocast):
    import torch
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad(), autocast():
        for batch in batches:
            count = sequences.target_tokens(batch)
            total += float(loss_on(model, sequences.tensors(batch), 0.0)) * count
            tokens += count
    model.train()
    return total / tokens


def learning_rate(peak, warmup, step, progress):
    """Linear warm-up over `warmup` steps, then cosine decay to zero as progress (0..1 of the budget) runs out."""
    return peak * min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model, lr, weight_decay, device):
    import torch
    decay, no_decay = [], []
    for parameter in model.parameters():
        (decay if parameter.ndim >= 2 else no_decay).append(parameter)   # norms' weights keep their scale
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.98), eps=1e-8,
                             fused=device == "cuda")


def epoch_batches(m30k_count, total, max_tokens, sequences, upsample, rng):
    """One epoch: Tatoeba once and Multi30k `upsample` times, in `upsample` parts that each hold one copy of
    Multi30k (no batch holds a pair twice); length-sorted batches of at most max_tokens padded ids."""
    m30k = np.arange(m30k_count)
    batches = []
    for part in np.array_split(rng.permutation(np.arange(m30k_count, total)), upsample):
        indices = np.concatenate([m30k, part])
        batches += token_budget_batches(indices, sequences.lengths[indices], max_tokens, rng)
    return batches


def train(model, train_set, m30k_count, val_set, preset, args, device):
    """Trains for args.minutes (or args.steps); returns the training record. Falls back to the best validation
    snapshot only if the final weights are clearly worse (over-fitting), as the encoder-decoder demo does."""
    import torch
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device == "cuda" else \
        (lambda: torch.autocast("cpu", enabled=False))
    hooks = add_residual_dropout(model, preset["dropout"])
    optimizer = make_optimizer(model, preset["lr"], args.weight_decay, device)
    rng = np.random.default_rng(args.seed)
    val_batches = token_budget_batches(np.arange(len(val_set)), val_set.lengths, preset["max_tokens"], rng)
    budget, steps = args.minutes * 60.0, args.steps
    model.to(device).train()
    step, epoch, target_tokens, history, best = 0, 0, 0, [], (float("inf"), None, 0)
    started = time.time()
    last_log = last_val = started
    done = False
    while not done:
        epoch += 1
        for batch in epoch_batches(m30k_count, len(train_set), preset["max_tokens"], train_set, args.upsample, rng):
            progress = step / steps if steps else (time.time() - started) / budget
            done = progress >= 1.0
            if done:
                break
            lr = learning_rate(preset["lr"], preset["warmup"], step, progress)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast():
                loss = loss_on(model, train_set.tensors(batch), args.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            target_tokens += train_set.target_tokens(batch)
            now = time.time()
            if now - last_log >= args.log_seconds or step == steps:
                log(f"step {step} epoch {epoch} loss {loss.item():.3f} lr {lr:.2e} "
                    f"{target_tokens / (now - started):,.0f} German tok/s elapsed {now - started:.0f}s")
                last_log = now
            if now - last_val >= args.val_seconds:
                val = validation_loss(model, val_set, val_batches, autocast)
                history.append({"step": step, "seconds": round(now - started, 1), "val_loss": round(val, 4)})
                log(f"step {step}: validation loss {val:.4f}")
                if val < best[0]:
                    best = (val, {key: value.detach().clone() for key, value in model.state_dict().items()}, step)
                last_val = time.time()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.time() - started
    for hook in hooks:
        hook.remove()
    final = validation_loss(model, val_set, val_batches, autocast)
    history.append({"step": step, "seconds": round(seconds, 1), "val_loss": round(final, 4)})
    used = "final"
    if best[1] is not None and final > best[0] * 1.05:
        model.load_state_dict(best[1])
        used = f"best validation snapshot (step {best[2]}, loss {best[0]:.4f})"
    memory = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if device == "cuda" else ""
    log(f"trained {seconds:.0f}s: {step} steps, {epoch} epochs, {target_tokens:,} German tokens; validation loss "
        f"{final:.4f}; weights: {used}{memory}")
    model.eval()
    return dict(steps=step, epochs=epoch, seconds=round(seconds, 1), target_tokens=target_tokens,
                target_tokens_per_second=round(target_tokens / seconds), final_val_loss=round(final, 4),
                weights_used=used, val_history=history)


# --- the checkpoint -------------------------------------------------------------------------------

def save_checkpoint(model, directory):
    """model.safetensors, config.json and generation_config.json beside the tokenizer files. Beam 4 and 128 new
    tokens by default, as the card's scores; max_new_tokens, unlike max_length, does not count the prompt."""
    from transformers import GenerationConfig
    model.generation_config = GenerationConfig(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=EOS, num_beams=4,
                                               max_new_tokens=MAX_NEW_TOKENS)
    model.to("cpu").float().save_pretrained(directory)


def write_prompt_template(path):
    with open(path, "w", encoding="utf-8") as template:
        template.write(PROMPT + "\n")   # seqtrans drops one final line end, as a text file has


# --- evaluation -----------------------------------------------------------------------------------

def hf_translate(model, tokenizer, sources, num_beams, device, batch_size):
    """HF generate() on the prompts, left-padded batches of similar length; the completion cut at its first line
    end, as `seqtrans translate --prompt-template` cuts it. Returns (translations, lines that ended without EOS)."""
    import torch
    from transformers import GenerationConfig
    config = GenerationConfig(num_beams=num_beams, do_sample=False, num_return_sequences=1, length_penalty=1.0,
                              early_stopping=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=EOS, pad_token_id=EOS,
                              bos_token_id=BOS, use_cache=True)
    encoded = [tokenizer(PROMPT.format(source=source))["input_ids"] for source in sources]
    order = sorted(range(len(sources)), key=lambda line: len(encoded[line]))
    outputs, unfinished = [None] * len(sources), 0
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        width = max(len(encoded[line]) for line in chunk)
        ids = torch.full((len(chunk), width), EOS, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, line in enumerate(chunk):
            ids[row, width - len(encoded[line]):] = torch.tensor(encoded[line])
            mask[row, width - len(encoded[line]):] = 1
        with torch.no_grad():
            generated = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                       generation_config=config)[:, width:].cpu()
        for row, line in enumerate(chunk):
            completion = generated[row].tolist()
            unfinished += EOS not in completion
            outputs[line] = tokenizer.decode(completion, skip_special_tokens=True).split("\n")[0].strip()
    return outputs, unfinished


def bleu(hypotheses, references):
    import sacrebleu
    metric = sacrebleu.BLEU()
    return round(metric.corpus_score(hypotheses, [references]).score, 2), str(metric.get_signature())


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as text_file:
        text_file.write("".join(line + "\n" for line in lines))


def read_output(path):
    with open(path, encoding="utf-8") as text_file:
        return [line.rstrip("\n").strip() for line in text_file]


def evaluate_hf(checkpoint, test, device, eval_dir):
    """HF generate() in fp32 (TF32 off, as in the parity goldens), greedy and beam 4."""
    import torch
    from transformers import LlamaForCausalLM, LlamaTokenizer
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    tokenizer = LlamaTokenizer.from_pretrained(checkpoint)
    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).to(device).eval()
    systems, outputs = {}, {}
    for search, num_beams in SEARCHES:
        started = time.time()
        hypotheses, unfinished = hf_translate(model, tokenizer, test[0], num_beams, device,
                                              100 if device == "cuda" else 20)
        name = f"hf_fp32_{search}"
        write_lines(os.path.join(eval_dir, f"{name}.de"), hypotheses)
        score, signature = bleu(hypotheses, test[1])
        systems[name] = dict(bleu=score, seconds=round(time.time() - started, 1), no_eos=unfinished, device=device)
        outputs[search] = hypotheses
        log(f"{name}: BLEU {score} ({systems[name]['seconds']}s, {unfinished} lines without EOS)")
    return systems, outputs, signature


def run_seqtrans(binary, model, source_file, output_file, beam, device, extra=()):
    """One `seqtrans translate` run; its wall-clock seconds, or the error's last line."""
    command = [binary, "translate", "-m", model, "-i", source_file, "-o", output_file, "-b", str(beam),
               "--device", device, "-q", *extra]
    started = time.time()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        return None, (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
    return round(time.time() - started, 1), None


def seqtrans_configurations(gpu):
    """(name, device, extra flags): the CPU (fp32 compute), and on a GPU its default fp16 and fp32."""
    configurations = [("cpu", "cpu", [])]
    if gpu:
        configurations += [("gpu_fp16", "cuda", ["--precision", "fp16"]), ("gpu_fp32", "cuda", ["--precision", "fp32"])]
    return configurations


def evaluate_seqtrans(binary, out_dir, test, hf_outputs, gpu, eval_dir):
    """`seqtrans translate --prompt-template` with the converted file: BLEU and lines equal to HF's (same search)."""
    model = os.path.join(out_dir, f"{MODEL_NAME}.seqtrans")
    template = ["--prompt-template", os.path.join(out_dir, "prompt-template.txt"), "--max-length", str(MAX_NEW_TOKENS),
                "0"]
    systems = {}
    for label, device, flags in seqtrans_configurations(gpu):
        for search, beam in SEARCHES:
            name = f"seqtrans_{label}_{search}"
            output = os.path.join(eval_dir, f"{name}.de")
            seconds, error = run_seqtrans(binary, model, os.path.join(eval_dir, "test.en"), output, beam, device,
                                          template + flags)
            if error:
                systems[name] = dict(error=error)
                log(f"{name}: failed: {error}")
                continue
            hypotheses = read_output(output)
            equal = sum(a == b for a, b in zip(hypotheses, hf_outputs[search]))
            systems[name] = dict(bleu=bleu(hypotheses, test[1])[0], seconds=seconds, equal_to_hf=equal)
            log(f"{name}: BLEU {systems[name]['bleu']}, {equal}/{len(hypotheses)} lines equal to HF's ({seconds}s)")
    return systems


def evaluate_encoder_decoder(binary, test, gpu, eval_dir):
    """The bundled encoder-decoder demo through `seqtrans translate` with its defaults (as its card measured it)."""
    device = "cuda" if gpu else "cpu"
    systems = {}
    for search, beam in SEARCHES:
        name = f"opus_demo_{'gpu' if gpu else 'cpu'}_{search}"
        output = os.path.join(eval_dir, f"{name}.de")
        seconds, error = run_seqtrans(binary, ENCODER_DECODER_DEMO, os.path.join(eval_dir, "test.en"), output, beam,
                                      device)
        if error:
            systems[name] = dict(error=error)
            log(f"{name}: failed: {error}")
            continue
        systems[name] = dict(bleu=bleu(read_output(output), test[1])[0], seconds=seconds)
        log(f"{name}: BLEU {systems[name]['bleu']} ({seconds}s)")
    return systems


def tokenizer_agreement(checkpoint, model_file, sources):
    """Prompts on which the converted file's tokenizer (as the C++ PromptTokenizer computes) gives HF's ids."""
    from make_llama_goldens import file_prompt_ids
    from transformers import LlamaTokenizer
    tokenizer = LlamaTokenizer.from_pretrained(checkpoint)
    encode = file_prompt_ids(model_file)
    prompts = [PROMPT.format(source=source) for source in sources]
    return sum(encode(prompt) == tokenizer(prompt)["input_ids"] for prompt in prompts)


# --- the model card -------------------------------------------------------------------------------

def bleu_cell(system, hf_lines=None):
    if system is None:
        return "not measured"
    if "error" in system:
        return f"failed: {system['error']}"
    cell = f"{system['bleu']:.2f}"
    if hf_lines is not None and "equal_to_hf" in system:
        cell += f" ({system['equal_to_hf']:,}/{hf_lines:,} lines as HF's)"
    return cell


def card_rows(results):
    test, environment = results["test"], results["environment"]
    systems, lines = test["systems"], test["lines"]
    gpu = environment["device"] if environment["device"] != "cpu" else "GPU"
    hf = f"Hugging Face transformers {environment['transformers']} `generate()`, fp32"
    rows = []
    for search, label in (("beam4", "beam 4"), ("greedy", "greedy")):
        rows.append((hf, label, bleu_cell(systems.get(f"hf_fp32_{search}"))))
    for key, what in (("cpu", "CPU (fp32 compute)"), ("gpu_fp16", f"{gpu}, fp16"), ("gpu_fp32", f"{gpu}, fp32")):
        for search, label in (("beam4", "beam 4"), ("greedy", "greedy")):
            system = systems.get(f"seqtrans_{key}_{search}")
            if system is not None:
                rows.append((f"**seqtrans**, this file, {what}", label, f"**{bleu_cell(system, lines)}**"))
    for key in sorted(name for name in systems if name.startswith("opus_demo_")):
        device = gpu if "_gpu_" in key else "CPU"
        label = "beam 4" if key.endswith("beam4") else "greedy"
        rows.append((f"encoder-decoder demo `opus-demo-en-de.seqtrans`, seqtrans, {device}", label,
                     bleu_cell(systems[key])))
    return rows


def write_card(results, path):
    """The model card, from results.json."""
    model, data, training, settings = results["model"], results["data"], results["training"], results["settings"]
    test, environment = results["test"], results["environment"]
    shape = model["shape"]
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    megabytes = f"{model['file_bytes']:,} bytes" if model.get("file_bytes") else "size not measured"
    escaped_prompt = PROMPT.replace("\n", "\\n")
    budget = f"{settings['steps']} steps" if settings["steps"] else f"{settings['minutes']:g} minutes of training"
    lines = [
        f"# {MODEL_NAME} — the bundled decoder-only English→German demo model", "",
        f"`{MODEL_NAME}.seqtrans` is a small Llama-architecture language model trained from scratch as a prompted "
        "English→German translator, the decoder-only counterpart of the encoder-decoder demo "
        "`opus-demo-en-de.seqtrans` (`README.md` here), on the same data. It completes", "",
        "```", PROMPT.replace("{source}", "A man rides a bike."), "```", "",
        "with the German sentence and `</s>`. Like the other demo it knows short, everyday sentences and image "
        "descriptions, nothing else: it is there to show and test decoder-only generation.", "",
        "```sh",
        f"seqtrans translate -m models/{MODEL_NAME}.seqtrans --prompt-template models/{MODEL_NAME}.prompt.txt "
        "< in.en > out.de",
        "printf 'English: A dog runs on the beach.\\\\nGerman:\\n' | "
        f"seqtrans generate -m models/{MODEL_NAME}.seqtrans "
        "--stop '\\n'",
        "```", "",
        f"`{MODEL_NAME}.prompt.txt` holds the template, `{escaped_prompt}` (a line end where `\\n` stands); the "
        "translation is the completion up to `</s>` or a line end.", "",
        "| | |", "|---|---|",
        f"| file | `{MODEL_NAME}.seqtrans`, fp16 weights, {megabytes} (converted by `scripts/convert_hf.py --dtype "
        "fp16`) |",
        "| architecture | Hugging Face `LlamaForCausalLM`: pre-norm (RMS norm), rotary positions (θ "
        f"{ROPE_THETA:,.0f}), grouped-query attention, SwiGLU feed-forward, input embedding tied to the output layer |",
        f"| shape | hidden {shape['hidden_size']}, {shape['num_hidden_layers']} layers, {shape['num_attention_heads']} "
        f"query heads and {shape['num_key_value_heads']} key/value heads of size {head_dim}, feed-forward "
        f"{shape['intermediate_size']}, max {shape['max_position_embeddings']} positions |",
        f"| parameters | {model['parameters']:,} (the embedding counted once) |",
        f"| tokenizer | SentencePiece BPE as Llama's: {model['vocab_size']:,} pieces with byte fallback, identity "
        "normalization, a dummy prefix, digits split, trained on the training text of both languages; `<unk>` = 0, "
        "`<s>` = 1 (BOS, first in every prompt), `</s>` = 2 (EOS); `tokenizer.model`, `tokenizer.json` and "
        "`tokenizer_config.json` as the hub ships Llama's |", "",
        "## Results", "",
        f"Multi30k `test_2016_flickr` ({test['lines']:,} sentences), each translated as the prompt above, the "
        f"completion cut at its first line end, scored with sacreBLEU {results['environment']['sacrebleu']} "
        f"(`{test['sacrebleu_signature']}`). Both search settings: `length_penalty=1.0`, `early_stopping=False`, "
        f"at most {MAX_NEW_TOKENS} new tokens (`max_new_tokens`, seqtrans `--max-length {MAX_NEW_TOKENS} 0`). HF: "
        "left-padded batches of similar length.", "",
        "| system | search | BLEU |", "|---|---|---|",
    ]
    lines += [f"| {system} | {search} | {cell} |" for system, search, cell in card_rows(results)]
    lines += [
        "",
        "seqtrans rows: `seqtrans translate -m MODEL --prompt-template TEMPLATE --max-length "
        f"{MAX_NEW_TOKENS} 0 -b 1` (or `-b 4`), default batching; \"lines as HF's\" counts translations identical to "
        "HF fp32's with the same search (seqtrans reads fp16 weights, HF fp32 ones). The encoder-decoder rows run "
        "`seqtrans translate -m models/opus-demo-en-de.seqtrans` with its defaults, as its card does. "
        f"The converted file's tokenizer gives HF's prompt ids on {results['tokenizer_agreement']} of "
        f"{test['lines']:,} test prompts.", "",
        f"Validation cross-entropy on Multi30k val ({data['val_pairs']:,} sentences, German side and `</s>`, no label "
        f"smoothing): {training['final_val_loss']:.3f} nats per token.", "",
        "## Training", "",
        f"- **Data**: Multi30k Task 1 train ({data['multi30k_pairs']:,} pairs kept) oversampled "
        f"{settings['multi30k_upsample']} times per epoch, plus the Tatoeba English–German pairs from manythings.org "
        f"({data['tatoeba_pairs']:,} kept), shuffled; {data['dropped']:,} pairs with more than {MAX_LENGTH} ids on "
        f"a side or a length ratio above {MAX_LENGTH_RATIO:g} dropped. Each pair is one sequence `<s>English: "
        "{src}\\nGerman: {tgt}</s>`; the loss covers the German tokens and `</s>` only. Multi30k val for the "
        "validation loss, Multi30k test_2016_flickr for the scores above (never used in training).",
        f"- **Method**: `scripts/train_llama_demo.py` with Hugging Face transformers {environment['transformers']} / "
        f"PyTorch {environment['torch']} on {environment['device_name']}, "
        f"{'bf16 autocast with fp32 weights' if settings['autocast'] == 'bf16' else 'fp32'}, AdamW (β 0.9 / 0.98, "
        f"ε 1e-8, weight decay {settings['weight_decay']} on weight matrices and the embedding), peak learning rate "
        f"{settings['lr']:g} after {settings['warmup']} warm-up steps, then cosine decay to zero over the time "
        f"budget, gradient clipping at 1.0, label smoothing {settings['label_smoothing']}, dropout "
        f"{settings['dropout']} on each block's output (added in training by hooks; the saved model is a plain "
        f"`LlamaForCausalLM`), length-sorted right-padded batches of at most {settings['max_tokens']:,} padded ids, "
        f"seed {settings['seed']}.",
        f"- **Budget**: {budget} ({training['seconds']:.0f} s wall clock): "
        f"{training['steps']:,} steps, {training['epochs']} epoch(s) (one epoch = Tatoeba once and Multi30k "
        f"{settings['multi30k_upsample']} times), {training['target_tokens']:,} German tokens, about "
        f"{training['target_tokens_per_second']:,} a second; weights: {training['weights_used']}. The whole run, "
        f"setup and evaluation included, took {results['total_seconds']:.0f} s.", "",
        "Reproduce (a different GPU or software version gives a slightly different model):", "",
        "```",
        "python3 scripts/train_llama_demo.py DATA_DIR OUT --device cuda --seqtrans build/seqtrans   # DATA_DIR: "
        "docs/DATA.md",
        "```", "",
        f"It writes `OUT/hf/` (the checkpoint as the hub lays it out), `OUT/{MODEL_NAME}.seqtrans`, "
        f"`OUT/prompt-template.txt` (here `{MODEL_NAME}.prompt.txt`), `OUT/results.json`, this card and the "
        "translations in `OUT/eval/`.", "",
        "## Data sources and terms", "",
        "The same corpora as the encoder-decoder demo, under the same terms (`README.md` here): **Multi30k** "
        "(research and education only, after the Flickr30K terms; please cite Elliott et al. 2016, "
        "doi:10.18653/v1/W16-3210) and **Tatoeba** English–German pairs as packaged by manythings.org, Creative "
        "Commons Attribution 2.0; attribution: **www.manythings.org/anki and tatoeba.org**. Because of the Multi30k "
        "terms, treat this model as a demo for research and education.", "",
    ]
    with open(path, "w", encoding="utf-8") as card:
        card.write("\n".join(lines))


# --- main -----------------------------------------------------------------------------------------

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="data directory: multi30k/ and tatoeba-manythings-en-de/ (docs/DATA.md)")
    parser.add_argument("out", help="output directory")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    parser.add_argument("--steps", type=int, default=0, help="train this many steps instead (the schedule follows)")
    parser.add_argument("--seqtrans", help="a seqtrans binary: evaluate the converted file and the encoder-decoder "
                        "demo with it")
    parser.add_argument("--smoke", action="store_true", help="tiny model, data and test set, 20 steps (a CPU check)")
    parser.add_argument("--reuse", action="store_true", help="keep OUT/hf and its training record; evaluate again")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    parser.add_argument("--max-tokens", type=int, help="padded ids per batch (default: the preset's)")
    parser.add_argument("--upsample", type=int, default=3, help="Multi30k copies per epoch")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--log-seconds", type=float, default=15.0)
    parser.add_argument("--val-seconds", type=float, default=45.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.smoke and not args.steps:
        args.steps = PRESETS["smoke"]["steps"]
    return args


def can_convert():
    """Whether protobuf is there for convert_hf.py. seqtrans_file may re-execute the process with the pure-Python
    protobuf, so it is imported now, before any work, rather than after training."""
    if importlib.util.find_spec("google.protobuf") is None:
        log("warning: no protobuf: the conversion and the seqtrans evaluations are skipped")
        return False
    import seqtrans_file  # noqa: F401
    return True


def prepare_tokenizer(m30k, tatoeba, preset, args, directory):
    """Trains the SentencePiece model on the training text (not val or test) and writes the tokenizer files."""
    started = time.time()
    spm_bytes = train_llama_spm(m30k[0] + m30k[1] + tatoeba[0] + tatoeba[1], preset["spm_vocab"], args.seed)
    tokenizer = build_tokenizer(directory, spm_bytes, legacy=False)
    log(f"tokenizer: {len(tokenizer)} pieces ({time.time() - started:.0f}s)")
    return tokenizer


def train_checkpoint(m30k, tatoeba, val, preset, args, device, checkpoint):
    """The tokenizer, the sequences, the model trained and saved; returns the results' model, data and training."""
    import torch
    tokenizer = prepare_tokenizer(m30k, tatoeba, preset, args, checkpoint)
    started = time.time()
    m30k_sequences = encode_pairs(tokenizer, *m30k)
    tatoeba_sequences = encode_pairs(tokenizer, *tatoeba)
    train_set = SequenceSet(m30k_sequences + tatoeba_sequences, device)
    val_set = SequenceSet(prompted_sequences(tokenizer, val[0], val[1], preset["shape"]["max_position_embeddings"]),
                          device)
    dropped = len(m30k[0]) + len(tatoeba[0]) - len(train_set)
    log(f"sequences: {len(m30k_sequences):,} Multi30k (x{args.upsample}) + {len(tatoeba_sequences):,} Tatoeba "
        f"(dropped {dropped}), {int(train_set.lengths.sum()):,} ids once ({time.time() - started:.0f}s)")
    model = build_model({"rope_theta": ROPE_THETA}, len(tokenizer), args.seed, shape=preset["shape"])
    parameters = sum(parameter.numel() for parameter in model.parameters())
    log(f"model: {parameters:,} parameters, device {device}")
    training = train(model, train_set, len(m30k_sequences), val_set, preset, args, device)
    save_checkpoint(model, checkpoint)
    del model, train_set
    if device == "cuda":
        torch.cuda.empty_cache()
    return (dict(shape=preset["shape"], parameters=parameters, vocab_size=len(tokenizer), rope_theta=ROPE_THETA),
            dict(multi30k_pairs=len(m30k_sequences), tatoeba_pairs=len(tatoeba_sequences), dropped=dropped,
                 val_pairs=len(val_set)),
            training)


def evaluate_all(args, test, device, checkpoint, converted):
    """Every system on the test set; returns the results' test section and the tokenizer agreement."""
    import torch
    eval_dir = os.path.join(args.out, "eval")
    os.makedirs(eval_dir, exist_ok=True)
    write_lines(os.path.join(eval_dir, "test.en"), test[0])
    write_lines(os.path.join(eval_dir, "test.de"), test[1])
    systems, hf_outputs, signature = evaluate_hf(checkpoint, test, device, eval_dir)
    agreement = None
    if converted:
        agreement = tokenizer_agreement(checkpoint, os.path.join(args.out, f"{MODEL_NAME}.seqtrans"), test[0])
        log(f"converted tokenizer: HF's prompt ids on {agreement}/{len(test[0])} test prompts")
    if args.seqtrans and converted:
        gpu = torch.cuda.is_available()
        systems.update(evaluate_seqtrans(args.seqtrans, args.out, test, hf_outputs, gpu, eval_dir))
        systems.update(evaluate_encoder_decoder(args.seqtrans, test, gpu, eval_dir))
    return dict(lines=len(test[0]), sacrebleu_signature=signature, systems=systems), agreement


def environment(device):
    import sacrebleu
    import sentencepiece
    import torch
    import transformers
    return dict(device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
                device_name=f"one {torch.cuda.get_device_name(0)}" if device == "cuda" else "the CPU",
                torch=torch.__version__, transformers=transformers.__version__, sacrebleu=sacrebleu.__version__,
                sentencepiece=sentencepiece.__version__, python=platform.python_version())


def print_summary(results, out_dir):
    for name, system in results["test"]["systems"].items():
        print(f"  {name:28s} " + (f"BLEU {system['bleu']:6.2f}" if "bleu" in system else f"FAILED {system['error']}")
              + (f"  {system['equal_to_hf']}/{results['test']['lines']} as HF" if "equal_to_hf" in system else "")
              + (f"  {system['seconds']}s" if "seconds" in system else ""))
    print("To commit (from the repository root):")
    for name, target in COMMITTED.items():
        if os.path.exists(os.path.join(out_dir, name)):
            print(f"  cp {os.path.join(out_dir, name)} {target}")


def main():
    args = parse_args()
    check_data(args.data)
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()   # saving and loading bars would bury the log
    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    preset = dict(PRESETS["smoke" if args.smoke else "demo"])
    preset.update({key: value for key, value in (("lr", args.lr), ("max_tokens", args.max_tokens)) if value})
    torch.manual_seed(args.seed)
    wall_started = time.time()
    converted = can_convert()
    os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, "hf")
    results_path = os.path.join(args.out, "results.json")
    m30k, tatoeba, val, test = read_corpora(args.data, preset, args.seed)

    if args.reuse:
        with open(results_path, encoding="utf-8") as previous:
            results = json.load(previous)
    else:
        shutil.rmtree(checkpoint, ignore_errors=True)
        os.makedirs(checkpoint)
        model, data, training = train_checkpoint(m30k, tatoeba, val, preset, args, device, checkpoint)
        results = dict(model=model, data=data, training=training,
                       settings=dict(preset="smoke" if args.smoke else "demo", minutes=args.minutes, steps=args.steps,
                                     lr=preset["lr"], warmup=preset["warmup"], dropout=preset["dropout"],
                                     max_tokens=preset["max_tokens"], weight_decay=args.weight_decay,
                                     label_smoothing=args.label_smoothing, multi30k_upsample=args.upsample,
                                     seed=args.seed, autocast="bf16" if device == "cuda" else "off"),
                       environment=environment(device))
    write_prompt_template(os.path.join(args.out, "prompt-template.txt"))
    model_file = os.path.join(args.out, f"{MODEL_NAME}.seqtrans")
    if converted:
        convert(checkpoint, model_file, "fp16")
        results["model"]["file_bytes"] = os.path.getsize(model_file)
        log(f"converted: {model_file}, {results['model']['file_bytes']:,} bytes")
    results["test"], results["tokenizer_agreement"] = evaluate_all(args, test, device, checkpoint, converted)
    results["environment"]["evaluated_on"] = environment(device)["device"]
    results["total_seconds"] = round(time.time() - wall_started, 1)
    with open(results_path, "w", encoding="utf-8") as results_file:
        json.dump(results, results_file, indent=2)
    write_card(results, os.path.join(args.out, "README-llama-demo.md"))
    log(f"done in {results['total_seconds']:.0f}s; wrote {results_path}")
    print_summary(results, args.out)


if __name__ == "__main__":
    main()
