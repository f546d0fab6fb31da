"""Shared parts of the Hugging Face checkpoint converters (scripts/convert_hf.py): reading config files and
weights, mapping a BART-style layer's tensors to seqtrans names, generation defaults and writing the file.

Only numpy and protobuf are needed (torch only for pytorch_model.bin). Tensor names and shapes follow
proto/model.proto. Every refusal is a ConversionError with a one-line message naming the file and setting.
"""
import json
import math
import os
import struct
import sys

import numpy as np

from seqtrans_file import DTYPE_BY_NAME, NUMPY_DTYPES, pb, write_model

# HF activation_function -> seqtrans Activation.
ACTIVATIONS = {
    "swish": pb.SWISH,
    "silu": pb.SWISH,
    "gelu": pb.GELU,
    "relu": pb.RELU,
    "gelu_new": pb.GELU_TANH,
    "gelu_pytorch_tanh": pb.GELU_TANH,
}
# torch.nn.LayerNorm's default: HF Marian, M2M100 and MBart build their layer norms without an eps argument.
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


def single_id(value):
    return value[0] if isinstance(value, list) else value


def suppressed_ids(config, generation, always=()):
    """always (Marian: the pad id) plus the length-1 bad_words_ids of generation_config.json (or old-style
    config.json); HF suppresses nothing else."""
    ids = list(always)
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


def resolve_tied(weights, name, tie_source, tied, shape):
    """The tensor HF 5 computes with for parameter name: its own stored value when the checkpoint has it (HF
    leaves a tied pair untied when both are stored and differ), else, when tie_word_embeddings is true, the
    first stored tensor of its tie group (tie_source first), as HF's tie_weights fills a missing key."""
    for candidate in [name] + (list(tie_source) if tied else []):
        if candidate in weights.tensors:
            return weights.take(candidate, shape)
    raise ConversionError(f"checkpoint: tensor {name} is missing"
                          + ("" if tied else " (tie_word_embeddings=false, so HF would leave it uninitialised)"))


def embedding_tensors(weights, names, tied, source_size, target_size, d_model):
    """names: HF names of the encoder embedding, decoder embedding and output projection, each with the tie
    sources HF would fill it from. Stores one shared table when encoder and decoder tables are equal, and no
    output matrix when it equals the decoder table. Returns (tensors, shared, tied_output)."""
    encoder = resolve_tied(weights, *names["encoder"], tied, (source_size, d_model))
    decoder = resolve_tied(weights, *names["decoder"], tied, (target_size, d_model))
    output = resolve_tied(weights, *names["output"], tied, (target_size, d_model))
    for name in names.get("unused", ()):
        weights.mark_used(name)
    shared = encoder.shape == decoder.shape and np.array_equal(encoder, decoder)
    tensors = [("shared/embedding", encoder)] if shared else [("encoder/embedding", encoder),
                                                              ("decoder/embedding", decoder)]
    tied_output = np.array_equal(output, decoder)
    if not tied_output:
        tensors.append(("decoder/output/weight", output))
    return tensors, shared, tied_output


def check_unused(weights, family):
    unused = weights.unused()
    if unused:
        raise ConversionError(f"checkpoint: unexpected tensor {unused[0]} ({len(unused)} unused in all); "
                              f"this {family} variant is not supported")


def set_stack(stack, config, prefix, pre_norm, final_norm, embedding_norm):
    stack.num_layers = config[f"{prefix}_layers"]
    stack.num_heads = config[f"{prefix}_attention_heads"]
    stack.ffn_dim = config[f"{prefix}_ffn_dim"]
    stack.pre_norm = pre_norm
    stack.final_layer_norm = final_norm
    stack.embedding_layer_norm = embedding_norm


def check_shape_settings(config, activation_default):
    """Refuses an unknown activation or a head count that does not divide d_model."""
    activation = config.get("activation_function", activation_default)
    if activation not in ACTIVATIONS:
        raise ConversionError(f"config.json: unsupported activation_function={json.dumps(activation)} "
                              f"(supported: {', '.join(sorted(ACTIVATIONS))})")
    for setting in ("encoder_attention_heads", "decoder_attention_heads"):
        if config["d_model"] % config[setting]:
            raise ConversionError(f"config.json: unsupported {setting}={config[setting]} (d_model={config['d_model']} "
                                  "is not divisible by it)")
    if config["d_model"] % 2:
        raise ConversionError(f"config.json: unsupported d_model={config['d_model']} (the sin/cos position layout "
                              "needs an even d_model)")
    return ACTIVATIONS[activation]


def write_converted(output, header, tensors, dtype_name):
    """Casts the tensors to the file's dtype (refusing values beyond fp16's range) and writes the file."""
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
