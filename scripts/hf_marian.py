"""MarianMTModel checkpoints (the OPUS-MT format) for convert_hf.py.

The checkpoint directory holds config.json, model.safetensors (or a sharded safetensors index, or
pytorch_model.bin, which needs torch), source.spm, target.spm, vocab.json and, for models with separate
vocabularies, target_vocab.json. Post-norm layers, split sinusoids, pad suppressed.
"""
import datetime
import json
import math
import os
import sys

import numpy as np

from hf_common import (LAYER_NORM_EPSILON, ConversionError, WeightTable, check_shape_settings, check_unused,
                       embedding_tensors, generation_defaults, layer_tensors, read_bytes, read_json, read_vocab,
                       read_weights, set_stack, single_id, suppressed_ids)
from seqtrans_file import FORMAT_VERSION, pb


def check_config(config, generation):
    """Refuses settings that seqtrans (or HF's Marian code) does not implement."""
    def refuse(setting, value, why):
        raise ConversionError(f"config.json: unsupported {setting}={json.dumps(value)} ({why})")

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
    eos = config.get("eos_token_id")
    if isinstance(eos, list) and len(eos) != 1:
        refuse("eos_token_id", eos, "exactly one end-of-sentence id is supported")
    for setting in ("pad_token_id", "eos_token_id"):
        if config.get(setting) is None:
            refuse(setting, None, "the id must be set")
    start = generation.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    if start is None:
        refuse("decoder_start_token_id", None, "the id must be set")


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


def embedding_names(share):
    """HF 5 MarianMTModel's tie groups (active only with tie_word_embeddings): with
    share_encoder_decoder_embeddings, both stacks' embed_tokens and lm_head tie to model.shared; without it,
    lm_head ties to the decoder's embed_tokens. Each stack embeds with its own embed_tokens module, so with
    tie_word_embeddings=false the stored encoder and decoder tables are used even when sharing is on."""
    encoder, decoder = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
    if share:
        group = ["model.shared.weight", encoder, decoder, "lm_head.weight"]
        return {"encoder": (encoder, [name for name in group if name != encoder]),
                "decoder": (decoder, [name for name in group if name != decoder]),
                "output": ("lm_head.weight", group[:3]),
                "unused": ["model.shared.weight"]}
    return {"encoder": (encoder, ["model.shared.weight"]), "decoder": (decoder, ["lm_head.weight"]),
            "output": ("lm_head.weight", [decoder]), "unused": ["model.shared.weight"]}


def build_tensors(weights, config):
    d_model = config["d_model"]
    share = config.get("share_encoder_decoder_embeddings", True)
    tied = config.get("tie_word_embeddings", True)
    source_size = config["vocab_size"]
    target_size = source_size if share else (config.get("decoder_vocab_size") or source_size)
    tensors, shared, tied_output = embedding_tensors(weights, embedding_names(share), tied, source_size,
                                                     target_size, d_model)
    for index in range(config["encoder_layers"]):
        tensors += layer_tensors(weights, "encoder", index, d_model, config["encoder_ffn_dim"])
    for index in range(config["decoder_layers"]):
        tensors += layer_tensors(weights, "decoder", index, d_model, config["decoder_ffn_dim"])
    output_bias = "final_logits_bias" in weights.tensors
    if output_bias:
        tensors.append(("decoder/output/bias", weights.take("final_logits_bias", (target_size,))))
    check_stored_positions(weights, d_model)
    check_unused(weights, "Marian")
    return tensors, source_size, target_size, shared, tied_output, output_bias


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


def convert(checkpoint, config, dtype_name):
    """Returns (ModelHeader, [(name, float32 array)]) for a MarianMTModel checkpoint."""
    generation = read_json(checkpoint, "generation_config.json", required=False) or {}
    tokenizer_config = read_json(checkpoint, "tokenizer_config.json", required=False) or {}
    check_config(config, generation)
    activation = check_shape_settings(config, "gelu")
    source_spm = read_bytes(checkpoint, "source.spm")
    target_spm = read_bytes(checkpoint, "target.spm")

    share = config.get("share_encoder_decoder_embeddings", True)
    separate = bool(tokenizer_config.get("separate_vocabs")) or (
        os.path.isfile(os.path.join(checkpoint, "target_vocab.json")) and not share)
    if separate and share:
        raise ConversionError("tokenizer_config.json: separate_vocabs=true but config.json shares the embeddings")
    weights = WeightTable(read_weights(checkpoint))
    tensors, source_size, target_size, shared, tied_output, output_bias = build_tensors(weights, config)
    source_vocab, target_vocab = vocab_pieces(checkpoint, separate, source_size, target_size)

    pad_id = single_id(config["pad_token_id"])
    eos_id = single_id(config["eos_token_id"])
    start_id = generation.get("decoder_start_token_id", config.get("decoder_start_token_id"))
    unk_piece = tokenizer_config.get("unk_token", "<unk>")
    unk_piece = unk_piece.get("content", "<unk>") if isinstance(unk_piece, dict) else unk_piece
    if unk_piece not in source_vocab:
        raise ConversionError(f"{checkpoint}/vocab.json: the unknown piece {unk_piece!r} is missing")
    for model_id in (pad_id, eos_id, start_id):
        if not 0 <= model_id < target_size:
            raise ConversionError(f"config.json: token id {model_id} is outside the target vocabulary ({target_size})")
    check_special_piece(target_vocab, eos_id, "</s>", "eos")
    check_special_piece(target_vocab, pad_id, "<pad>", "pad")

    header = pb.ModelHeader(format_version=FORMAT_VERSION)
    header.description = (f"converted from {os.path.basename(os.path.abspath(checkpoint))} (HF MarianMT, "
                          f"transformers {config.get('transformers_version', 'unknown')}) by convert_hf.py "
                          f"on {datetime.date.today().isoformat()}, {dtype_name}")
    model = header.config
    model.kind = pb.ENCODER_DECODER
    model.d_model = config["d_model"]
    set_stack(model.encoder, config, "encoder", False, False, False)
    set_stack(model.decoder, config, "decoder", False, False, False)
    model.activation = activation
    model.layer_norm_epsilon = LAYER_NORM_EPSILON
    model.position_encoding = pb.SINUSOIDAL_SPLIT
    model.position_offset = 0
    model.max_positions = config["max_position_embeddings"]
    model.embedding_scale = math.sqrt(config["d_model"]) if config.get("scale_embedding") else 1.0
    model.shared_embeddings = shared
    model.tied_output = tied_output
    model.source_vocab_size = source_size
    model.target_vocab_size = target_size
    model.pad_id = pad_id
    model.eos_id = eos_id
    model.unk_id = source_vocab.index(unk_piece)
    model.decoder_start_id = start_id
    model.output_bias = output_bias
    # HF's Marian generation configs carry bad_words_ids=[[pad]]; seqtrans always keeps pad out for Marian.
    model.suppressed_ids.extend(suppressed_ids(config, generation, always=[pad_id]))
    for key, value in generation_defaults(config, generation, eos_id).items():
        setattr(header.generation, key, value)

    header.tokenizer.source_spm = source_spm
    header.tokenizer.target_spm = target_spm
    header.tokenizer.source_vocab.extend(source_vocab)
    header.tokenizer.target_vocab.extend(target_vocab)
    return header, tensors
