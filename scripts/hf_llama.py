"""LlamaForCausalLM (Llama-2, TinyLlama) and MistralForCausalLM (without a sliding window) checkpoints for
convert_hf.py: decoder-only Transformers with RMS norms, rotary positions, grouped-query attention and a gated
(SwiGLU) feed-forward block.

What transformers 5 computes, as read in its modeling and tokenization code:
- The model: embed_tokens (not scaled); per layer input_layernorm -> self_attn (q, k, v, o projections, biases
  when attention_bias) -> residual, post_attention_layernorm -> mlp down(act(gate x) * up x) (biases when
  mlp_bias) -> residual; the final norm; lm_head, tied to embed_tokens when tie_word_embeddings. LlamaRMSNorm:
  x / sqrt(mean(x^2) + rms_norm_eps) * weight, in fp32. Attention scale head_dim^-0.5; head_dim from the
  config (default hidden_size / num_attention_heads). Mistral's layers are Llama's without biases.
- Rotary positions: the default RoPE only (rope_type "default", no scaling, partial_rotary_factor 1): channel
  pairs (i, i + head_dim / 2) turn by position * rope_theta^(-2i / head_dim). HF checkpoints store q_proj and
  k_proj rows already in that rotate_half order, so the weights are stored as they are.
- The tokenizer: LlamaTokenizer (tokenizers backend) builds its pipeline in code, whatever tokenizer.json's
  normalizer and pre-tokenizer say: the BPE vocabulary and merges of tokenizer.json with byte fallback, no
  normalizer, Metaspace with prepend_scheme "first" (legacy=false, the default), "always" (legacy=true) or
  "never" (add_prefix_space=false), and tokenizer.json's post-processor (whether <s> comes first). Added
  tokens <unk>, <s>, </s> are cut out of the text first. seqtrans stores tokenizer.model with its normalizer
  cleared (identity, no dummy prefix, spaces kept), which gives the same pieces, and records the prefix
  scheme and BOS.
"""
import datetime
import json
import os
import sys

import numpy as np

from hf_common import (ACTIVATIONS, ConversionError, WeightTable, check_unused, generation_defaults, read_bytes,
                       read_json, read_weights, resolve_tied, single_id, suppressed_ids)
from seqtrans_file import FORMAT_VERSION, pb

# HF LlamaConfig's and MistralConfig's defaults for settings a config.json may leave out.
CONFIG_DEFAULTS = {
    "LlamaForCausalLM": dict(family="Llama", rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1,
                             eos_token_id=2, max_position_embeddings=2048),
    "MistralForCausalLM": dict(family="Mistral", rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1,
                               eos_token_id=2, max_position_embeddings=4096 * 32),
}
DEFAULT_ROPE_THETA = 10000.0
TOKENIZER_CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast")


def refuse(setting, value, why, source="config.json"):
    raise ConversionError(f"{source}: unsupported {setting}={json.dumps(value)} ({why})")


# --- configuration --------------------------------------------------------------------------------

def rope_theta(config):
    """The RoPE base, refusing any RoPE but HF's default one. transformers 5 writes rope_parameters
    ({"rope_type", "rope_theta"}); older configs write rope_theta and rope_scaling (null when unscaled)."""
    for setting in ("rope_parameters", "rope_scaling"):
        rope = config.get(setting)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            refuse(setting, rope, "expected an object")
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            refuse(setting, rope, "only unscaled rotary positions, rope_type \"default\", are supported")
        if rope.get("partial_rotary_factor", 1.0) != 1.0:
            refuse(setting, rope, "rotary positions must turn every channel of a head (partial_rotary_factor 1)")
        if "rope_theta" in rope:
            return float(rope["rope_theta"])
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        refuse("partial_rotary_factor", config["partial_rotary_factor"], "rotary positions must turn every channel")
    return float(config.get("rope_theta", DEFAULT_ROPE_THETA))


def check_config(config, architecture):
    """Refuses settings that seqtrans does not implement; returns (activation, head_dim, kv_heads, theta)."""
    defaults = CONFIG_DEFAULTS[architecture]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    activation = config.get("hidden_act", "silu")
    if activation not in ACTIVATIONS:
        refuse("hidden_act", activation, f"supported: {', '.join(sorted(ACTIVATIONS))}")
    if heads % kv_heads:
        refuse("num_key_value_heads", kv_heads, f"num_attention_heads={heads} is not a multiple of it")
    if head_dim % 2:
        refuse("head_dim", head_dim, "rotary positions turn channel pairs, so it must be even")
    window = config.get("sliding_window")
    positions = config.get("max_position_embeddings", defaults["max_position_embeddings"])
    if architecture == "MistralForCausalLM" and window is not None and window < positions:
        refuse("sliding_window", window, f"seqtrans attends to every earlier position; only a window of at least "
                                         f"max_position_embeddings={positions}, or null, is supported")
    eos = config.get("eos_token_id", defaults["eos_token_id"])
    if isinstance(eos, list) and len(eos) != 1:
        refuse("eos_token_id", eos, "exactly one end-of-sequence id is supported")
    return ACTIVATIONS[activation], head_dim, kv_heads, rope_theta(config)


# --- tensors ------------------------------------------------------------------------------------

def projection(weights, hf_name, rows, columns, bias):
    """[(suffix, array)] of one linear layer: its weight and, when the config has biases, its bias."""
    parts = [("weight", weights.take(f"{hf_name}.weight", (rows, columns)))]
    if bias:
        parts.append(("bias", weights.take(f"{hf_name}.bias", (rows,))))
    return parts


def fused(weights, hf_names, rows, columns, bias):
    """The projections hf_names stacked row-wise (q, k, v; gate, up), each with its own row count."""
    parts = [dict(projection(weights, name, count, columns, bias)) for name, count in zip(hf_names, rows)]
    return [(kind, np.concatenate([part[kind] for part in parts], axis=0)) for kind in parts[0]]


def layer_tensors(weights, config, index, head_dim, kv_heads):
    d_model, ffn_dim = config["hidden_size"], config["intermediate_size"]
    queries, keys = config["num_attention_heads"] * head_dim, kv_heads * head_dim
    attention_bias, mlp_bias = config.get("attention_bias", False), config.get("mlp_bias", False)
    hf, prefix = f"model.layers.{index}", f"decoder/layer_{index}"
    attention = [f"{hf}.self_attn.{name}" for name in ("q_proj", "k_proj", "v_proj")]
    tensors = [(f"{prefix}/self_attention/qkv/{kind}", array)
               for kind, array in fused(weights, attention, (queries, keys, keys), d_model, attention_bias)]
    tensors += [(f"{prefix}/self_attention/output/{kind}", array)
                for kind, array in projection(weights, f"{hf}.self_attn.o_proj", d_model, queries, attention_bias)]
    tensors.append((f"{prefix}/self_attention/norm/gamma", weights.take(f"{hf}.input_layernorm.weight", (d_model,))))
    gate_up = [f"{hf}.mlp.gate_proj", f"{hf}.mlp.up_proj"]
    tensors += [(f"{prefix}/ffn/inner/{kind}", array)
                for kind, array in fused(weights, gate_up, (ffn_dim, ffn_dim), d_model, mlp_bias)]
    tensors += [(f"{prefix}/ffn/outer/{kind}", array)
                for kind, array in projection(weights, f"{hf}.mlp.down_proj", d_model, ffn_dim, mlp_bias)]
    tensors.append((f"{prefix}/ffn/norm/gamma", weights.take(f"{hf}.post_attention_layernorm.weight", (d_model,))))
    return tensors


def check_stored_rotary(weights, head_dim, theta):
    """Older checkpoints store each layer's inv_freq buffer: it must be the one seqtrans computes."""
    expected = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    for name in [name for name in weights.tensors if name.endswith("rotary_emb.inv_freq")]:
        if not np.allclose(weights.tensors[name], expected, rtol=1e-5):
            raise ConversionError(f"checkpoint: {name} is not rope_theta^(-2i/head_dim) for rope_theta={theta}")
        weights.mark_used(name)


def build_tensors(weights, config, architecture, head_dim, kv_heads, theta):
    """Returns (tensors, tied_output)."""
    d_model, vocab_size = config["hidden_size"], config["vocab_size"]
    tied = config.get("tie_word_embeddings", CONFIG_DEFAULTS[architecture]["tie_word_embeddings"])
    embedding = weights.take("model.embed_tokens.weight", (vocab_size, d_model))
    output = resolve_tied(weights, "lm_head.weight", ["model.embed_tokens.weight"], tied, (vocab_size, d_model))
    tensors = [("decoder/embedding", embedding)]
    for index in range(config["num_hidden_layers"]):
        tensors += layer_tensors(weights, config, index, head_dim, kv_heads)
    tensors.append(("decoder/final_norm/gamma", weights.take("model.norm.weight", (d_model,))))
    tied_output = np.array_equal(output, embedding)
    if not tied_output:
        tensors.append(("decoder/output/weight", output))
    check_stored_rotary(weights, head_dim, theta)
    check_unused(weights, CONFIG_DEFAULTS[architecture]["family"])
    return tensors, tied_output


# --- tokenizer ------------------------------------------------------------------------------------

def load_spm(checkpoint):
    """tokenizer.model as a SentencePiece ModelProto, refusing models HF's LlamaTokenizer would not mirror."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:
        raise ConversionError("converting a Llama-family tokenizer needs the sentencepiece package "
                              "(pip install sentencepiece)")
    source = os.path.join(checkpoint, "tokenizer.model")
    model = sentencepiece_model_pb2.ModelProto()
    try:
        model.ParseFromString(read_bytes(checkpoint, "tokenizer.model"))
    except Exception as error:  # protobuf's DecodeError, or a version-specific one
        raise ConversionError(f"{source}: not a SentencePiece model ({error})")
    if model.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.BPE:
        refuse("model_type", model.trainer_spec.model_type, "LlamaTokenizer reads BPE models only", source)
    if not model.trainer_spec.byte_fallback:
        refuse("byte_fallback", False, "Llama-family tokenizers fall back to bytes", source)
    return model


def cleared_normalizer(model):
    """The model serialized with the normalization HF's LlamaTokenizer applies: none. The tokenizer adds the "▁"
    prefix itself (SpacePrefix), so SentencePiece must add no dummy prefix, keep every space and fold nothing."""
    spec = model.normalizer_spec
    spec.name = "identity"
    spec.precompiled_charsmap = b""
    spec.add_dummy_prefix = False
    spec.remove_extra_whitespaces = False
    spec.escape_whitespaces = True
    return model.SerializeToString()


def prompt_bos(document, bos_piece, source):
    """Whether a prompt starts with <s>: tokenizer.json's post-processor alone decides (transformers 5.24 ignores
    tokenizer_config.json's add_bos_token and add_eos_token, and adds nothing without a post-processor)."""
    processor = document.get("post_processor")
    if processor is None:
        return False
    single = processor.get("single") if processor.get("type") == "TemplateProcessing" else None
    items = [next(iter(item)) + ":" + next(iter(item.values()))["id"] for item in single or []]
    if items == ["Sequence:A"]:
        return False
    if items == [f"SpecialToken:{bos_piece}", "Sequence:A"]:
        return True
    refuse("post_processor", processor.get("single", processor.get("type")),
           f"a prompt is framed as [{bos_piece}] text, nothing else", source)


def check_vocabulary(document, model, vocab_size, source):
    """tokenizer.json's BPE vocabulary must be tokenizer.model's pieces in the same ids, and the model's rows."""
    bpe = document.get("model", {})
    if bpe.get("type") != "BPE" or not bpe.get("byte_fallback"):
        refuse("model", {"type": bpe.get("type"), "byte_fallback": bpe.get("byte_fallback")},
               "need a BPE model with byte fallback", source)
    pieces = [piece.piece for piece in model.pieces]
    if len(pieces) != vocab_size:
        raise ConversionError(f"{source}: tokenizer.model has {len(pieces)} pieces, but the model's embedding has "
                              f"{vocab_size} rows")
    differing = [piece for piece, model_id in bpe.get("vocab", {}).items()
                 if model_id >= len(pieces) or pieces[model_id] != piece]
    if differing or len(bpe.get("vocab", {})) != len(pieces):
        raise ConversionError(f"{source}: its vocabulary differs from tokenizer.model's pieces "
                              f"({len(differing)} ids differ; first: {differing[:1]})")
    return pieces


def check_added_tokens(document, pieces, special_ids, source):
    """The added tokens must be exactly unk, bos and eos, marked special: the text the tokenizer cuts out."""
    added = {token["id"]: token for token in document.get("added_tokens", [])}
    if sorted(added) != sorted(set(special_ids)):
        raise ConversionError(f"{source}: unsupported added_tokens (ids {sorted(added)}; seqtrans supports exactly "
                              f"<unk>, <s> and </s>, ids {sorted(set(special_ids))})")
    for model_id, token in added.items():
        if token["content"] != pieces[model_id] or not token.get("special", False):
            raise ConversionError(f"{source}: added token {token['content']!r} (id {model_id}) is not the special "
                                  f"piece {pieces[model_id]!r} of tokenizer.model")


def space_prefix(tokenizer_config):
    """HF's _get_prepend_scheme for LlamaTokenizer: add_prefix_space (default true), then legacy (default false)."""
    if tokenizer_config.get("add_prefix_space") is False:
        return pb.SPACE_PREFIX_NEVER
    return pb.SPACE_PREFIX_ALWAYS if tokenizer_config.get("legacy", False) else pb.SPACE_PREFIX_FIRST


def tokenizer_setup(checkpoint, vocab_size, bos_id, eos_id):
    """(serialized SentencePiece model, unk id, add_bos, space prefix)."""
    tokenizer_config = read_json(checkpoint, "tokenizer_config.json", required=False) or {}
    tokenizer_class = tokenizer_config.get("tokenizer_class", "LlamaTokenizer")
    if tokenizer_class not in TOKENIZER_CLASSES:
        refuse("tokenizer_class", tokenizer_class, f"need {' or '.join(TOKENIZER_CLASSES)}", "tokenizer_config.json")
    source = os.path.join(checkpoint, "tokenizer.json")
    document = read_json(checkpoint, "tokenizer.json")
    model = load_spm(checkpoint)
    pieces = check_vocabulary(document, model, vocab_size, source)
    unk_id = model.trainer_spec.unk_id
    for name, model_id in (("bos_token_id", bos_id), ("eos_token_id", eos_id)):
        if not 0 <= model_id < len(pieces):
            refuse(name, model_id, f"outside the vocabulary of {len(pieces)}")
    check_added_tokens(document, pieces, (unk_id, bos_id, eos_id), source)
    add_bos = prompt_bos(document, pieces[bos_id], source)
    return cleared_normalizer(model), unk_id, add_bos, space_prefix(tokenizer_config)


# --- the header -----------------------------------------------------------------------------------

def special_ids(config, generation, architecture):
    """(bos, eos, pad): generate() reads generation_config.json first, then config.json; HF pads with EOS when
    no pad id is set, and so does the file (pad only marks finished rows: nothing is suppressed)."""
    defaults = CONFIG_DEFAULTS[architecture]

    def setting(key, default=None):
        value = generation.get(key, config.get(key, default))
        if isinstance(value, list) and len(value) != 1:
            refuse(key, value, "exactly one id is supported",
                   "generation_config.json" if key in generation else "config.json")
        return single_id(value)

    bos, eos, pad = (setting(key, defaults.get(key)) for key in ("bos_token_id", "eos_token_id", "pad_token_id"))
    for key, value in (("bos_token_id", bos), ("eos_token_id", eos)):
        if value is None:
            refuse(key, None, "the id must be set")
    return bos, eos, eos if pad is None else pad


def decoder_only_defaults(config, generation, eos_id):
    """generation_defaults without max_length: for a decoder-only model HF counts the prompt in it, which the
    file's max_length (counting one start token) cannot say."""
    defaults = generation_defaults(config, generation, eos_id)
    if defaults.pop("max_length", None) is not None:
        print("note: the checkpoint's max_length (prompt included) is not stored; give --max-length",
              file=sys.stderr)
    return defaults


def convert(checkpoint, config, dtype_name, architecture):
    """Returns (ModelHeader, [(name, float32 array)]) for a LlamaForCausalLM or MistralForCausalLM checkpoint."""
    defaults = CONFIG_DEFAULTS[architecture]
    generation = read_json(checkpoint, "generation_config.json", required=False) or {}
    activation, head_dim, kv_heads, theta = check_config(config, architecture)
    bos_id, eos_id, pad_id = special_ids(config, generation, architecture)
    vocab_size = config["vocab_size"]
    if not 0 <= pad_id < vocab_size:
        refuse("pad_token_id", pad_id, f"outside the vocabulary of {vocab_size}")
    spm, unk_id, add_bos, prefix = tokenizer_setup(checkpoint, vocab_size, bos_id, eos_id)
    weights = WeightTable(read_weights(checkpoint))
    tensors, tied_output = build_tensors(weights, config, architecture, head_dim, kv_heads, theta)

    header = pb.ModelHeader(format_version=FORMAT_VERSION)
    header.description = (f"converted from {os.path.basename(os.path.abspath(checkpoint))} (HF {architecture}, "
                          f"transformers {config.get('transformers_version', 'unknown')}) by convert_hf.py on "
                          f"{datetime.date.today().isoformat()}, {dtype_name}")
    model = header.config
    model.kind = pb.DECODER_ONLY
    model.d_model = config["hidden_size"]
    stack = model.decoder
    stack.num_layers = config["num_hidden_layers"]
    stack.num_heads = config["num_attention_heads"]
    stack.num_kv_heads = kv_heads
    stack.head_dim = head_dim
    stack.ffn_dim = config["intermediate_size"]
    stack.pre_norm = True
    stack.final_layer_norm = True
    model.activation = activation
    model.norm = pb.RMS_NORM
    model.layer_norm_epsilon = config.get("rms_norm_eps", defaults["rms_norm_eps"])
    model.position_encoding = pb.ROTARY
    model.rope_theta = theta
    model.max_positions = config.get("max_position_embeddings", defaults["max_position_embeddings"])
    model.embedding_scale = 1.0
    model.shared_embeddings = False
    model.tied_output = tied_output
    model.target_vocab_size = vocab_size
    model.gated_ffn = True
    model.no_attention_bias = not config.get("attention_bias", False)
    model.no_ffn_bias = not config.get("mlp_bias", False)
    model.bos_id = bos_id
    model.eos_id = eos_id
    model.pad_id = pad_id
    model.unk_id = unk_id
    # generate() starts from BOS when a prompt is empty.
    model.decoder_start_id = bos_id
    model.suppressed_ids.extend(suppressed_ids(config, generation))
    for key, value in decoder_only_defaults(config, generation, eos_id).items():
        setattr(header.generation, key, value)

    header.tokenizer.target_spm = spm
    header.tokenizer.add_bos = add_bos
    header.tokenizer.space_prefix = prefix
    return header, tensors
