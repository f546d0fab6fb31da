#!/usr/bin/env python3
"""Converts a Hugging Face MarianMT checkpoint (the OPUS-MT format) into a seqtrans model file.

Usage: convert_marian.py CHECKPOINT_DIR OUTPUT_FILE [--dtype fp16|fp32]

The checkpoint directory holds config.json, model.safetensors (or a sharded safetensors index, or
pytorch_model.bin, which needs torch), source.spm, target.spm, vocab.json and, for models with
separate vocabularies, target_vocab.json. Tensor names and shapes follow proto/model.proto.
Unsupported settings are refused with one line naming the setting.
"""
import argparse
import datetime
import json
import math
import os
import struct
import sys

import numpy as np

from seqtrans_file import DTYPE_BY_NAME, FORMAT_VERSION, NUMPY_DTYPES, FormatError, pb, write_model

# HF activation_function -> seqtrans Activation.
ACTIVATIONS = {
    "swish": pb.SWISH,
    "silu": pb.SWISH,
    "gelu": pb.GELU,
    "relu": pb.RELU,
    "gelu_new": pb.GELU_TANH,
    "gelu_pytorch_tanh": pb.GELU_TANH,
}
# torch.nn.LayerNorm's default; HF Marian builds its layer norms without an eps argument.
LAYER_NORM_EPSILON = 1e-5
FP16_MAX = 65504.0


class ConversionError(Exception):
    """A checkpoint that cannot be converted; the message is one line for the user."""


# --- reading the checkpoint ----------------------------------------------------------------------

def read_json(directory, name, required=True):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        if required:
            raise ConversionError(f"{path}: file not found")
        return None
    try:
        with open(path, encoding="utf-8") as json_file:
            return json.load(json_file)
    except json.JSONDecodeError as error:
        raise ConversionError(f"{path}: invalid JSON ({error})")


def read_bytes(directory, name):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: file not found")
    with open(path, "rb") as input_file:
        return input_file.read()


def bfloat16_to_float32(raw):
    # bf16 is the upper half of an fp32 bit pattern.
    return (raw.astype(np.uint32) << 16).view(np.float32)


SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


def read_safetensors(path):
    """Returns {name: float32 array}; a small reader so that bf16 files need no torch."""
    with open(path, "rb") as tensor_file:
        (header_size,) = struct.unpack("<Q", tensor_file.read(8))
        index = json.loads(tensor_file.read(header_size))
    mapped = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_size)
    tensors = {}
    for name, info in index.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ConversionError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        array = mapped[begin:end].view(SAFETENSORS_DTYPES[info["dtype"]])
        array = bfloat16_to_float32(array) if info["dtype"] == "BF16" else array.astype(np.float32)
        tensors[name] = array.reshape(info["shape"])
    return tensors


def read_pytorch_bin(path):
    try:
        import torch
    except ImportError:
        raise ConversionError(f"{path}: reading pytorch_model.bin needs torch (pip install torch), "
                              "or convert the checkpoint to safetensors first")
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: value.float().numpy() for name, value in state.items() if hasattr(value, "float")}


def read_weights(directory):
    single = os.path.join(directory, "model.safetensors")
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(single):
        return read_safetensors(single)
    if os.path.isfile(index_path):
        shards = sorted(set(read_json(directory, "model.safetensors.index.json")["weight_map"].values()))
        tensors = {}
        for shard in shards:
            tensors.update(read_safetensors(os.path.join(directory, shard)))
        return tensors
    bin_path = os.path.join(directory, "pytorch_model.bin")
    if os.path.isfile(bin_path):
        return read_pytorch_bin(bin_path)
    raise ConversionError(f"{directory}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def read_vocab(directory, name):
    """vocab.json maps piece -> model id; returns the pieces as a list indexed by id."""
    path = os.path.join(directory, name)
    mapping = read_json(directory, name)
    if not isinstance(mapping, dict) or not mapping:
        raise ConversionError(f"{path}: expected a non-empty JSON object piece -> id")
    pieces = [None] * (max(mapping.values()) + 1)
    for piece, model_id in mapping.items():
        if not isinstance(model_id, int) or model_id < 0:
            raise ConversionError(f"{path}: piece {piece!r} has invalid id {model_id!r}")
        if pieces[model_id] is not None:
            raise ConversionError(f"{path}: id {model_id} is used by both {pieces[model_id]!r} and {piece!r}")
        pieces[model_id] = piece
    missing = [model_id for model_id, piece in enumerate(pieces) if piece is None]
    if missing:
        raise ConversionError(f"{path}: ids are not contiguous (first missing id: {missing[0]})")
    return pieces


# --- checking the configuration ------------------------------------------------------------------

def check_config(config, generation):
    """Refuses settings that seqtrans (or HF's Marian code) does not implement."""
    def refuse(setting, value, why):
        raise ConversionError(f"config.json: unsupported {setting}={json.dumps(value)} ({why})")

    if config.get("model_type") != "marian":
        refuse("model_type", config.get("model_type"), "only 'marian' checkpoints are handled by this converter")
    architectures = config.get("architectures") or ["MarianMTModel"]
    if "MarianMTModel" not in architectures:
        refuse("architectures", architectures, "need MarianMTModel")
    # Settings from the older BART-style config that HF Marian models leave at these values.
    must_be_false = {
        "normalize_before": "pre-norm Marian checkpoints are not supported",
        "add_final_layer_norm": "a final layer norm is not part of Marian models",
        "normalize_embedding": "an embedding layer norm is not part of Marian models",
        "add_bias_logits": "only final_logits_bias is supported",
        "scale_attention": "unexpected attention scaling",
    }
    for setting, why in must_be_false.items():
        if config.get(setting):
            refuse(setting, config[setting], why)
    if config.get("static_position_embeddings") is False:
        refuse("static_position_embeddings", False, "Marian uses fixed sinusoidal positions")
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        refuse("activation_function", activation, f"supported: {', '.join(sorted(ACTIVATIONS))}")
    for setting in ("encoder_attention_heads", "decoder_attention_heads"):
        if config["d_model"] % config[setting]:
            refuse(setting, config[setting], f"d_model={config['d_model']} is not divisible by it")
    if config.get("d_model", 0) % 2:
        refuse("d_model", config["d_model"], "the sin/cos position layout needs an even d_model")
    eos = config.get("eos_token_id")
    if isinstance(eos, list):
        if len(eos) != 1:
            refuse("eos_token_id", eos, "exactly one end-of-sentence id is supported")
    for setting in ("pad_token_id", "eos_token_id"):
        if config.get(setting) is None:
            refuse(setting, None, "the id must be set")
    start = generation.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    if start is None:
        refuse("decoder_start_token_id", None, "the id must be set")


def single_id(value):
    return value[0] if isinstance(value, list) else value


def suppressed_ids(config, generation, pad_id):
    """[pad_id] plus the length-1 bad_words_ids of generation_config.json (or old-style config.json)."""
    ids = [pad_id]
    bad_words = generation.get("bad_words_ids", config.get("bad_words_ids")) or []
    longer = [words for words in bad_words if len(words) != 1]
    if longer:
        print(f"warning: bad_words_ids entries longer than one token are not stored: {longer}", file=sys.stderr)
    for words in bad_words:
        if len(words) == 1 and words[0] not in ids:
            ids.append(words[0])
    return ids


def generation_defaults(config, generation, eos_id):
    """The checkpoint's num_beams, max_length and forced_eos_token_id: from generation_config.json when the
    checkpoint has one, else from config.json, as HF from_pretrained builds the generation config. A value
    the file lacks stays absent (seqtrans's built-in default applies; HF would use max_length 20)."""
    source, values = ("generation_config.json", generation) if generation else ("config.json", config)

    def setting(key):
        return source, values.get(key)

    defaults = {}
    source, forced = setting("forced_eos_token_id")
    if forced is not None:
        if isinstance(forced, list) and len(forced) != 1:
            raise ConversionError(f"{source}: unsupported forced_eos_token_id={json.dumps(forced)} "
                                  "(exactly one id is supported)")
        forced = single_id(forced)
        if forced != eos_id:
            raise ConversionError(f"{source}: unsupported forced_eos_token_id={forced} (it differs from "
                                  f"eos_token_id={eos_id}; seqtrans can force only EOS at the length limit)")
        defaults["forced_eos_token_id"] = forced
    source, max_length = setting("max_length")
    if max_length is not None:
        if not isinstance(max_length, int) or max_length < 2:
            raise ConversionError(f"{source}: unsupported max_length={json.dumps(max_length)} (it counts the "
                                  "decoder start token, so it must be at least 2)")
        defaults["max_length"] = max_length
    source, num_beams = setting("num_beams")
    if num_beams is not None:
        if not isinstance(num_beams, int) or not 1 <= num_beams <= 256:
            raise ConversionError(f"{source}: unsupported num_beams={json.dumps(num_beams)} (1 to 256)")
        defaults["num_beams"] = num_beams
    return defaults


# --- mapping tensors ------------------------------------------------------------------------------

class WeightTable:
    """Hands out checkpoint tensors by HF name and remembers which ones were used."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.used = set()

    def take(self, name, shape):
        if name not in self.tensors:
            raise ConversionError(f"checkpoint: tensor {name} is missing")
        array = self.tensors[name]
        if name == "final_logits_bias":
            array = array.reshape(-1)
        if tuple(array.shape) != tuple(shape):
            raise ConversionError(f"checkpoint: tensor {name} has shape {list(array.shape)}, expected {list(shape)}")
        self.used.add(name)
        return array

    def first_present(self, names):
        return next((name for name in names if name in self.tensors), None)

    def mark_used(self, name):
        if name in self.tensors:
            self.used.add(name)

    def unused(self):
        return sorted(set(self.tensors) - self.used)


def sinusoid_split(num_positions, dim):
    """HF MarianSinusoidalPositionalEmbedding: sin over the first half of the channels, cos over the second."""
    positions = np.arange(num_positions, dtype=np.float64)[:, None]
    rates = np.power(10000.0, -2.0 * np.arange(dim // 2, dtype=np.float64) / dim)[None, :]
    return np.concatenate([np.sin(positions * rates), np.cos(positions * rates)], axis=1)


def check_stored_positions(weights, d_model):
    """Older checkpoints store the position tables; they must be the sinusoids seqtrans computes."""
    for stack in ("encoder", "decoder"):
        name = f"model.{stack}.embed_positions.weight"
        if name in weights.tensors:
            table = weights.tensors[name]
            expected = sinusoid_split(table.shape[0], d_model)
            if table.shape[1] != d_model or not np.allclose(table, expected, atol=1e-4):
                raise ConversionError(f"checkpoint: {name} is not the split sin/cos table seqtrans computes")
            weights.mark_used(name)


def attention_tensors(weights, hf_prefix, prefix, d_model, fused_query):
    """fused_query: self-attention (q, k, v fused into qkv); otherwise cross-attention (query + kv)."""
    def part(projection, kind):
        shape = (d_model, d_model) if kind == "weight" else (d_model,)
        return weights.take(f"{hf_prefix}.{projection}.{kind}", shape)

    tensors = []
    for kind in ("weight", "bias"):
        if fused_query:
            tensors.append((f"{prefix}/qkv/{kind}", np.concatenate([part("q_proj", kind), part("k_proj", kind),
                                                                   part("v_proj", kind)], axis=0)))
        else:
            tensors.append((f"{prefix}/query/{kind}", part("q_proj", kind)))
            tensors.append((f"{prefix}/kv/{kind}", np.concatenate([part("k_proj", kind), part("v_proj", kind)],
                                                                  axis=0)))
    for kind in ("weight", "bias"):
        tensors.append((f"{prefix}/output/{kind}", part("out_proj", kind)))
    return tensors


def norm_tensors(weights, hf_name, prefix, d_model):
    return [(f"{prefix}/gamma", weights.take(f"{hf_name}.weight", (d_model,))),
            (f"{prefix}/beta", weights.take(f"{hf_name}.bias", (d_model,)))]


def ffn_tensors(weights, hf_layer, prefix, d_model, ffn_dim):
    return [(f"{prefix}/inner/weight", weights.take(f"{hf_layer}.fc1.weight", (ffn_dim, d_model))),
            (f"{prefix}/inner/bias", weights.take(f"{hf_layer}.fc1.bias", (ffn_dim,))),
            (f"{prefix}/outer/weight", weights.take(f"{hf_layer}.fc2.weight", (d_model, ffn_dim))),
            (f"{prefix}/outer/bias", weights.take(f"{hf_layer}.fc2.bias", (d_model,))),
            *norm_tensors(weights, f"{hf_layer}.final_layer_norm", f"{prefix}/norm", d_model)]


def layer_tensors(weights, stack, index, d_model, ffn_dim):
    hf_layer = f"model.{stack}.layers.{index}"
    prefix = f"{stack}/layer_{index}"
    tensors = attention_tensors(weights, f"{hf_layer}.self_attn", f"{prefix}/self_attention", d_model, True)
    tensors += norm_tensors(weights, f"{hf_layer}.self_attn_layer_norm", f"{prefix}/self_attention/norm", d_model)
    if stack == "decoder":
        tensors += attention_tensors(weights, f"{hf_layer}.encoder_attn", f"{prefix}/cross_attention", d_model,
                                     False)
        tensors += norm_tensors(weights, f"{hf_layer}.encoder_attn_layer_norm", f"{prefix}/cross_attention/norm",
                                d_model)
    tensors += ffn_tensors(weights, hf_layer, f"{prefix}/ffn", d_model, ffn_dim)
    return tensors


def embedding_tensors(weights, config, shared, tied):
    d_model = config["d_model"]
    source_size = config["vocab_size"]
    target_size = config.get("decoder_vocab_size") or source_size
    if shared:
        if target_size != source_size:
            raise ConversionError(f"config.json: share_encoder_decoder_embeddings=true but vocab_size={source_size} "
                                  f"!= decoder_vocab_size={target_size}")
        name = weights.first_present(["model.shared.weight", "model.encoder.embed_tokens.weight",
                                      "model.decoder.embed_tokens.weight"])
        if name is None:
            raise ConversionError("checkpoint: no shared embedding (model.shared.weight) found")
        table = weights.take(name, (source_size, d_model))
        for alias in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            if alias in weights.tensors and not np.array_equal(weights.tensors[alias], table):
                raise ConversionError(f"checkpoint: {alias} differs from {name} although embeddings are shared")
            weights.mark_used(alias)
        tensors = [("shared/embedding", table)]
        decoder_table = table
    else:
        encoder_name = weights.first_present(["model.encoder.embed_tokens.weight", "model.shared.weight"])
        if encoder_name is None:
            raise ConversionError("checkpoint: tensor model.encoder.embed_tokens.weight is missing")
        decoder_table = weights.take("model.decoder.embed_tokens.weight", (target_size, d_model))
        tensors = [("encoder/embedding", weights.take(encoder_name, (source_size, d_model))),
                   ("decoder/embedding", decoder_table)]
        weights.mark_used("model.shared.weight")
    if tied:
        if "lm_head.weight" in weights.tensors and not np.array_equal(weights.tensors["lm_head.weight"],
                                                                      decoder_table):
            print("warning: lm_head.weight differs from the decoder embedding, but tie_word_embeddings=true "
                  "(as in HF, the tied embedding is used)", file=sys.stderr)
        weights.mark_used("lm_head.weight")
    else:
        tensors.append(("decoder/output/weight", weights.take("lm_head.weight", (target_size, d_model))))
    return tensors, source_size, target_size


def build_tensors(weights, config, shared, tied):
    d_model = config["d_model"]
    tensors, source_size, target_size = embedding_tensors(weights, config, shared, tied)
    for index in range(config["encoder_layers"]):
        tensors += layer_tensors(weights, "encoder", index, d_model, config["encoder_ffn_dim"])
    for index in range(config["decoder_layers"]):
        tensors += layer_tensors(weights, "decoder", index, d_model, config["decoder_ffn_dim"])
    output_bias = "final_logits_bias" in weights.tensors
    if output_bias:
        tensors.append(("decoder/output/bias", weights.take("final_logits_bias", (target_size,))))
    check_stored_positions(weights, d_model)
    unused = weights.unused()
    if unused:
        raise ConversionError(f"checkpoint: unexpected tensor {unused[0]} ({len(unused)} unused in all); "
                              "this Marian variant is not supported")
    return tensors, source_size, target_size, output_bias


# --- assembling the header ------------------------------------------------------------------------

def vocab_pieces(directory, separate, source_size, target_size):
    source = read_vocab(directory, "vocab.json")
    target = read_vocab(directory, "target_vocab.json") if separate else source
    for name, pieces, size in (("vocab.json", source, source_size),
                               ("target_vocab.json" if separate else "vocab.json", target, target_size)):
        if len(pieces) != size:
            raise ConversionError(f"{os.path.join(directory, name)}: {len(pieces)} pieces, but the model's "
                                  f"embedding has {size} rows")
    return source, target


def check_special_piece(pieces, model_id, expected, what):
    if pieces[model_id] != expected:
        print(f"warning: {what} id {model_id} is {pieces[model_id]!r} in the vocabulary, expected {expected!r}",
              file=sys.stderr)


def convert(checkpoint, output, dtype_name):
    if not os.path.isdir(checkpoint):
        raise ConversionError(f"{checkpoint}: checkpoint directory not found")
    config = read_json(checkpoint, "config.json")
    generation = read_json(checkpoint, "generation_config.json", required=False) or {}
    tokenizer_config = read_json(checkpoint, "tokenizer_config.json", required=False) or {}
    check_config(config, generation)
    source_spm = read_bytes(checkpoint, "source.spm")
    target_spm = read_bytes(checkpoint, "target.spm")

    shared = config.get("share_encoder_decoder_embeddings", True)
    tied = config.get("tie_word_embeddings", True)
    separate = bool(tokenizer_config.get("separate_vocabs")) or (
        os.path.isfile(os.path.join(checkpoint, "target_vocab.json")) and not shared)
    if separate and shared:
        raise ConversionError("tokenizer_config.json: separate_vocabs=true but config.json shares the embeddings")
    weights = WeightTable(read_weights(checkpoint))
    tensors, source_size, target_size, output_bias = build_tensors(weights, config, shared, tied)
    source_vocab, target_vocab = vocab_pieces(checkpoint, separate, source_size, target_size)

    pad_id = single_id(config["pad_token_id"])
    eos_id = single_id(config["eos_token_id"])
    start_id = generation.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    unk_piece = tokenizer_config.get("unk_token", "<unk>")
    unk_piece = unk_piece.get("content", "<unk>") if isinstance(unk_piece, dict) else unk_piece
    if unk_piece not in source_vocab:
        raise ConversionError(f"{checkpoint}/vocab.json: the unknown piece {unk_piece!r} is missing")
    unk_id = source_vocab.index(unk_piece)
    for model_id, size in ((pad_id, target_size), (eos_id, target_size), (start_id, target_size)):
        if not 0 <= model_id < size:
            raise ConversionError(f"config.json: token id {model_id} is outside the target vocabulary ({size})")
    check_special_piece(target_vocab, eos_id, "</s>", "eos")
    check_special_piece(target_vocab, pad_id, "<pad>", "pad")

    header = pb.ModelHeader(format_version=FORMAT_VERSION)
    header.description = (f"converted from {os.path.basename(os.path.abspath(checkpoint))} (HF MarianMT, "
                          f"transformers {config.get('transformers_version', 'unknown')}) by convert_marian.py "
                          f"on {datetime.date.today().isoformat()}, {dtype_name}")
    model = header.config
    model.d_model = config["d_model"]
    for stack, prefix in ((model.encoder, "encoder"), (model.decoder, "decoder")):
        stack.num_layers = config[f"{prefix}_layers"]
        stack.num_heads = config[f"{prefix}_attention_heads"]
        stack.ffn_dim = config[f"{prefix}_ffn_dim"]
        stack.pre_norm = False
        stack.final_layer_norm = False
        stack.embedding_layer_norm = False
    model.activation = ACTIVATIONS[config.get("activation_function", "gelu")]
    model.layer_norm_epsilon = LAYER_NORM_EPSILON
    model.position_encoding = pb.SINUSOIDAL_SPLIT
    model.max_positions = config["max_position_embeddings"]
    model.embedding_scale = math.sqrt(config["d_model"]) if config.get("scale_embedding") else 1.0
    model.shared_embeddings = shared
    model.tied_output = tied
    model.source_vocab_size = source_size
    model.target_vocab_size = target_size
    model.pad_id = pad_id
    model.eos_id = eos_id
    model.unk_id = unk_id
    model.decoder_start_id = start_id
    model.output_bias = output_bias
    model.suppressed_ids.extend(suppressed_ids(config, generation, pad_id))
    for key, value in generation_defaults(config, generation, eos_id).items():
        setattr(header.generation, key, value)

    header.tokenizer.source_spm = source_spm
    header.tokenizer.target_spm = target_spm
    header.tokenizer.source_vocab.extend(source_vocab)
    header.tokenizer.target_vocab.extend(target_vocab)

    dtype = DTYPE_BY_NAME[dtype_name]
    converted = []
    for name, array in tensors:
        if dtype == pb.FP16:
            largest = float(np.max(np.abs(array))) if array.size else 0.0
            if not math.isfinite(largest) or largest > FP16_MAX:
                raise ConversionError(f"checkpoint: tensor {name} has values up to {largest}, beyond fp16's range; "
                                      "use --dtype fp32")
        converted.append((name, np.ascontiguousarray(array, dtype=NUMPY_DTYPES[dtype])))
    size = write_model(output, header, converted)
    parameters = sum(array.size for _, array in converted)
    print(f"wrote {output}: {len(converted)} tensors, {parameters:,} parameters, {dtype_name}, {size:,} bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="Hugging Face MarianMT checkpoint directory")
    parser.add_argument("output", help="seqtrans model file to write")
    parser.add_argument("--dtype", choices=sorted(DTYPE_BY_NAME), default="fp32",
                        help="data type of the stored weights (default: fp32)")
    args = parser.parse_args()
    try:
        convert(args.checkpoint, args.output, args.dtype)
    except (ConversionError, FormatError) as error:
        print(f"convert_marian: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
