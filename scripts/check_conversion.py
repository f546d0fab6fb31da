#!/usr/bin/env python3
"""Checks a converted seqtrans model against its Hugging Face checkpoint.

Usage: check_conversion.py CHECKPOINT_DIR MODEL_FILE [--tolerance T]

Runs a plain numpy implementation of the seqtrans model file (written from proto/model.proto, not
from HF's code) with teacher forcing on a few sentences, and compares its log-probabilities with
the HF model's (MarianMTModel, M2M100ForConditionalGeneration, MBartForConditionalGeneration; source
and target languages: the first two language codes of the file). Needs torch and transformers. Also a
readable reference of what the engine computes: post- or pre-norm layers, final and embedding norms,
split / fairseq sinusoids or a learned table shifted by position_offset, attention scale on the query,
tied output, bias.
"""
import argparse
import math
import sys

import numpy as np

from seqtrans_file import load_tensors, pb

SENTENCES = ["Hello world.", "A man in a blue shirt is standing on a ladder cleaning windows.",
             "Two dogs play in the snow, while a child watches them from the porch of an old house."]


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def activate(x, activation):
    if activation == pb.SWISH:
        return x / (1.0 + np.exp(-x))
    if activation == pb.RELU:
        return np.maximum(x, 0.0)
    if activation == pb.GELU:
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    if activation == pb.GELU_TANH:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    raise ValueError(f"unknown activation {activation}")


def sinusoids(length, dim, offset=0, fairseq=False):
    """Rows offset .. offset+length-1: sin over the first half, cos over the second; channel k of a half turns
    at 10000^(-2k/dim) (Marian) or 10000^(-k/(half-1)) (fairseq: M2M-100, NLLB)."""
    positions = np.arange(offset, offset + length, dtype=np.float64)[:, None]
    half = np.arange(dim // 2, dtype=np.float64)
    exponents = half / (dim // 2 - 1) if fairseq else 2.0 * half / dim
    rates = np.power(10000.0, -exponents)[None, :]
    return np.concatenate([np.sin(positions * rates), np.cos(positions * rates)], axis=1)


class ReferenceModel:
    """The seqtrans model file evaluated in float64 numpy, one sentence at a time."""

    def __init__(self, path):
        header, tensors = load_tensors(path)
        self.config = header.config
        self.weights = {name: np.asarray(array, dtype=np.float64) for name, array in tensors.items()}

    def w(self, name):
        return self.weights[name]

    def embed(self, ids, stack):
        table = self.w("shared/embedding") if self.config.shared_embeddings else self.w(f"{stack}/embedding")
        config = self.config
        if config.position_encoding == pb.LEARNED:
            table_rows = self.w(f"{stack}/position_embedding")
            positions = table_rows[config.position_offset:config.position_offset + len(ids)]
        else:
            positions = sinusoids(len(ids), config.d_model, config.position_offset,
                                  config.position_encoding == pb.SINUSOIDAL_FAIRSEQ)
        x = table[ids] * config.embedding_scale + positions
        if getattr(config, stack).embedding_layer_norm:
            x = self.norm(x, f"{stack}/embedding_norm")
        return x

    def sublayer(self, x, stack_config, prefix, function):
        """x + function(x) then norm (post-norm), or x + function(norm(x)) (pre-norm)."""
        if stack_config.pre_norm:
            return x + function(self.norm(x, f"{prefix}/norm"))
        return self.norm(x + function(x), f"{prefix}/norm")

    def finish(self, x, stack):
        return self.norm(x, f"{stack}/final_norm") if getattr(self.config, stack).final_layer_norm else x

    def attention(self, query_input, memory, prefix, num_heads, causal):
        d = self.config.d_model
        head_dim = d // num_heads
        if memory is None:  # self-attention: [3d, d] rows query, key, value
            qkv = query_input @ self.w(f"{prefix}/qkv/weight").T + self.w(f"{prefix}/qkv/bias")
            query, key, value = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        else:
            query = query_input @ self.w(f"{prefix}/query/weight").T + self.w(f"{prefix}/query/bias")
            kv = memory @ self.w(f"{prefix}/kv/weight").T + self.w(f"{prefix}/kv/bias")
            key, value = kv[:, :d], kv[:, d:]
        split = lambda x: x.reshape(x.shape[0], num_heads, head_dim).transpose(1, 0, 2)  # [heads, len, hd]
        scores = split(query) / math.sqrt(head_dim) @ split(key).transpose(0, 2, 1)
        if causal:
            scores = scores + np.triu(np.full(scores.shape[1:], -np.inf), k=1)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ split(value)
        context = context.transpose(1, 0, 2).reshape(query_input.shape[0], d)
        return context @ self.w(f"{prefix}/output/weight").T + self.w(f"{prefix}/output/bias")

    def norm(self, x, prefix):
        return layer_norm(x, self.w(f"{prefix}/gamma"), self.w(f"{prefix}/beta"), self.config.layer_norm_epsilon)

    def ffn(self, x, prefix):
        inner = activate(x @ self.w(f"{prefix}/inner/weight").T + self.w(f"{prefix}/inner/bias"),
                         self.config.activation)
        return inner @ self.w(f"{prefix}/outer/weight").T + self.w(f"{prefix}/outer/bias")

    def encode(self, source_ids):
        x = self.embed(source_ids, "encoder")
        stack = self.config.encoder
        for index in range(stack.num_layers):
            prefix = f"encoder/layer_{index}"
            x = self.sublayer(x, stack, f"{prefix}/self_attention",
                              lambda y: self.attention(y, None, f"{prefix}/self_attention", stack.num_heads, False))
            x = self.sublayer(x, stack, f"{prefix}/ffn", lambda y: self.ffn(y, f"{prefix}/ffn"))
        return self.finish(x, "encoder")

    def decode_log_probs(self, memory, decoder_ids):
        """Log-probabilities [len(decoder_ids), V_tgt] for every prefix of decoder_ids."""
        x = self.embed(decoder_ids, "decoder")
        stack = self.config.decoder
        for index in range(stack.num_layers):
            prefix = f"decoder/layer_{index}"
            x = self.sublayer(x, stack, f"{prefix}/self_attention",
                              lambda y: self.attention(y, None, f"{prefix}/self_attention", stack.num_heads, True))
            x = self.sublayer(x, stack, f"{prefix}/cross_attention",
                              lambda y: self.attention(y, memory, f"{prefix}/cross_attention", stack.num_heads, False))
            x = self.sublayer(x, stack, f"{prefix}/ffn", lambda y: self.ffn(y, f"{prefix}/ffn"))
        x = self.finish(x, "decoder")
        if self.config.tied_output:
            output = self.w("shared/embedding") if self.config.shared_embeddings else self.w("decoder/embedding")
        else:
            output = self.w("decoder/output/weight")
        logits = x @ output.T
        if self.config.output_bias:
            logits = logits + self.w("decoder/output/bias")
        logits = logits - logits.max(-1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("model_file")
    parser.add_argument("--tolerance", type=float, default=None,
                        help="max allowed |log-prob difference| (default 1e-3 for fp32 files, 0.2 for fp16)")
    args = parser.parse_args()

    import torch
    import transformers

    reference = ReferenceModel(args.model_file)
    header = load_tensors(args.model_file)[0]
    fp16 = any(entry.dtype == pb.FP16 for entry in header.tensors)
    tolerance = args.tolerance if args.tolerance is not None else (0.2 if fp16 else 1e-3)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.checkpoint)
    codes = [entry.code for entry in header.tokenizer.language_codes]
    if len(codes) >= 2:
        tokenizer.src_lang, tokenizer.tgt_lang = codes[0], codes[1]
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(args.checkpoint, dtype=torch.float32,
                                                               attn_implementation="eager").eval()
    worst = 0.0
    for sentence in SENTENCES:
        source_ids = tokenizer(sentence)["input_ids"]
        target_ids = tokenizer(text_target=sentence)["input_ids"]
        decoder_ids = [reference.config.decoder_start_id] + target_ids[:-1]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([source_ids]),
                           decoder_input_ids=torch.tensor([decoder_ids])).logits[0]
        expected = torch.log_softmax(logits.double(), -1).numpy()
        actual = reference.decode_log_probs(reference.encode(np.array(source_ids)), np.array(decoder_ids))
        difference = float(np.abs(actual - expected).max())
        agree = float((actual.argmax(-1) == expected.argmax(-1)).mean())
        worst = max(worst, difference)
        print(f"{len(source_ids):3d} source, {len(decoder_ids):3d} target tokens: max |log p diff| "
              f"{difference:.2e}, argmax agreement {agree:.0%}")
    status = "OK" if worst <= tolerance else "MISMATCH"
    print(f"{status}: worst difference {worst:.2e} (tolerance {tolerance:g})")
    sys.exit(0 if status == "OK" else 1)


if __name__ == "__main__":
    main()
