"""M2M100ForConditionalGeneration (M2M-100, NLLB-200) and MBartForConditionalGeneration (mBART-50) checkpoints
for convert_hf.py: pre-norm fairseq-style Transformers with language-code tokens.

What transformers 5 computes, as read in its modeling and tokenization code (see also docs in README.md):
- Both families: pre-norm layers, a final layer norm in each stack (model.<stack>.layer_norm), torch's
  LayerNorm eps 1e-5, embeddings x sqrt(d_model) when scale_embedding (M2M100Config defaults it to true,
  MBartConfig to false), fairseq ids <s>=0 <pad>=1 </s>=2 <unk>=3, decoder start = EOS (2).
- M2M-100/NLLB positions: M2M100SinusoidalPositionalEmbedding, sin half then cos half, channel k at
  10000^(-k/(half-1)); the row of a token is padding_idx + 1 + (number of non-pad tokens up to and
  including it), so a pad token's row is padding_idx (zeros) and pads do not advance later positions:
  position_offset = pad_token_id + 1 for pad-free sequences. The table grows on demand (no hard limit).
- mBART positions: MBartLearnedPositionalEmbedding, row = position + 2 whatever the ids (offset 2), table
  [max_position_embeddings + 2, d]; layernorm_embedding after embedding + position; final_logits_bias.
- Tokenizers: NLLB's and mBART-50's ids come from tokenizer.json (fast tokenizer: the SentencePiece pieces
  shifted by one after <s> <pad> </s> <unk>, then language codes and <mask> as added tokens); M2M-100's from
  vocab.json, its __xx__ tokens at len(vocab.json) + index in the language list, then 8 "madeupword" ids.
  Source framing: [code] tokens </s> (NLLB with legacy_behaviour: tokens </s> [code]).
"""
import datetime
import json
import math
import os
import sys

import numpy as np

from hf_common import (LAYER_NORM_EPSILON, ConversionError, WeightTable, check_shape_settings, check_unused,
                       embedding_tensors, generation_defaults, layer_tensors, norm_tensors, read_bytes,
                       read_json, read_weights, set_stack, single_id, suppressed_ids)
from seqtrans_file import FORMAT_VERSION, pb

# fairseq's names for the padding rows after the real vocabulary (M2M100Tokenizer's num_madeup_words).
MADEUP_WORD = "madeupword{:04d}"
# M2M100Tokenizer's language lists by its language_codes setting (its __xx__ tokens take ids in this order).
M2M100_LANGUAGES = {
    "m2m100": ("af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi "
               "hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns "
               "oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh "
               "zu").split(),
    "wmt21": "en ha is ja cs ru zh de".split(),
}
FAMILY_DEFAULTS = {
    # architecture: (family name, activation default, scale_embedding default)
    "M2M100ForConditionalGeneration": ("M2M-100", "relu", True),
    "MBartForConditionalGeneration": ("mBART", "gelu", False),
}


# --- configuration --------------------------------------------------------------------------------

def check_config(config, architecture):
    family, activation_default, _ = FAMILY_DEFAULTS[architecture]
    for setting in ("pad_token_id", "eos_token_id"):
        if config.get(setting) is None:
            raise ConversionError(f"config.json: unsupported {setting}=null (the id must be set)")
    eos = config.get("eos_token_id")
    if isinstance(eos, list) and len(eos) != 1:
        raise ConversionError(f"config.json: unsupported eos_token_id={json.dumps(eos)} (exactly one id is supported)")
    # add_final_layer_norm / normalize_before in old mBART configs are ignored: HF's MBart code always has
    # pre-norm layers and both final norms, and so does the file.
    return check_shape_settings(config, activation_default)


def embedding_names():
    """HF 5 M2M100/MBart: with tie_word_embeddings, both stacks' embed_tokens and lm_head tie to model.shared."""
    shared = "model.shared.weight"
    encoder, decoder, output = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"
    group = [shared, encoder, decoder, output]
    return {"encoder": (encoder, [name for name in group if name != encoder]),
            "decoder": (decoder, [name for name in group if name != decoder]),
            "output": (output, group[:3]), "unused": [shared]}


# --- tensors ------------------------------------------------------------------------------------

def sinusoid_fairseq(num_rows, dim, padding_idx):
    """M2M100SinusoidalPositionalEmbedding's table, as a check of tables older checkpoints store."""
    half = dim // 2
    rates = np.exp(np.arange(half, dtype=np.float64) * -(math.log(10000.0) / (half - 1)))
    angles = np.arange(num_rows, dtype=np.float64)[:, None] * rates[None, :]
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    table[padding_idx] = 0.0
    return table


def check_stored_sinusoids(weights, d_model, padding_idx):
    for stack in ("encoder", "decoder"):
        for name in (f"model.{stack}.embed_positions.weights", f"model.{stack}.embed_positions.weight"):
            if name in weights.tensors:
                table = weights.tensors[name]
                if table.shape[1] != d_model or not np.allclose(
                        table, sinusoid_fairseq(table.shape[0], d_model, padding_idx), atol=1e-4):
                    raise ConversionError(f"checkpoint: {name} is not the fairseq sin/cos table seqtrans computes")
                weights.mark_used(name)


def stack_tensors(weights, config, stack, learned_positions, d_model):
    """A stack's layers, its final norm and, for mBART, its embedding norm and learned position table."""
    tensors = []
    for index in range(config[f"{stack}_layers"]):
        tensors += layer_tensors(weights, stack, index, d_model, config[f"{stack}_ffn_dim"])
    tensors += norm_tensors(weights, f"model.{stack}.layer_norm", f"{stack}/final_norm", d_model)
    if learned_positions:
        rows = config["max_position_embeddings"] + 2
        tensors += norm_tensors(weights, f"model.{stack}.layernorm_embedding", f"{stack}/embedding_norm", d_model)
        tensors.append((f"{stack}/position_embedding",
                        weights.take(f"model.{stack}.embed_positions.weight", (rows, d_model))))
    return tensors


def build_tensors(weights, config, mbart, vocab_size):
    d_model = config["d_model"]
    tied = config.get("tie_word_embeddings", True)
    tensors, shared, tied_output = embedding_tensors(weights, embedding_names(), tied, vocab_size, vocab_size,
                                                     d_model)
    tensors += stack_tensors(weights, config, "encoder", mbart, d_model)
    tensors += stack_tensors(weights, config, "decoder", mbart, d_model)
    output_bias = "final_logits_bias" in weights.tensors
    if output_bias:
        tensors.append(("decoder/output/bias", weights.take("final_logits_bias", (vocab_size,))))
    if not mbart:
        check_stored_sinusoids(weights, d_model, single_id(config["pad_token_id"]))
    check_unused(weights, "M2M-100" if not mbart else "mBART")
    return tensors, shared, tied_output, output_bias


# --- tokenizer ------------------------------------------------------------------------------------

def pieces_from_tokenizer_json(checkpoint):
    """{id: piece} of tokenizer.json: the model's vocabulary (a BPE piece -> id map or a Unigram list in id
    order) plus the added tokens (specials, language codes, <mask>)."""
    path = os.path.join(checkpoint, "tokenizer.json")
    document = read_json(checkpoint, "tokenizer.json")
    model = document.get("model", {})
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        by_id = {model_id: piece for piece, model_id in vocab.items()}
    elif isinstance(vocab, list):
        by_id = {model_id: entry[0] for model_id, entry in enumerate(vocab)}
    else:
        raise ConversionError(f"{path}: unsupported model.type={json.dumps(model.get('type'))} (need BPE or Unigram "
                              "with a vocab)")
    for token in document.get("added_tokens", []):
        by_id[token["id"]] = token["content"]
    return by_id


def fairseq_spm_pieces(checkpoint, spm_bytes, code_tokens):
    """{id: piece} by fairseq's rule, for a checkpoint without tokenizer.json (the SentencePiece-based NLLB and
    mBART-50 tokenizers): <s> <pad> </s> <unk>, SentencePiece piece i at i + 1 (its own <unk> <s> </s> take
    the fairseq ids), then the language codes in order, then <mask>."""
    import sentencepiece as spm
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes)
    by_id = {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>"}
    specials = set(by_id.values())
    for piece_id in range(processor.get_piece_size()):
        piece = processor.id_to_piece(piece_id)
        if piece not in specials:
            by_id[piece_id + 1] = piece
    size = processor.get_piece_size() + 1
    for index, token in enumerate(code_tokens):
        by_id[size + index] = token
    by_id[size + len(code_tokens)] = "<mask>"
    print(f"warning: {checkpoint}: no tokenizer.json; ids derived from sentencepiece.bpe.model by fairseq's rule "
          "(codes after the pieces, then <mask>)", file=sys.stderr)
    return by_id


def m2m100_pieces(checkpoint, tokenizer_config):
    """{id: piece} of M2M100Tokenizer: vocab.json, then one __xx__ token per language of its list."""
    vocab_path = os.path.join(checkpoint, "vocab.json")
    vocab = read_json(checkpoint, "vocab.json")
    if not isinstance(vocab, dict) or not vocab:
        raise ConversionError(f"{vocab_path}: expected a non-empty JSON object piece -> id")
    by_id = {model_id: piece for piece, model_id in vocab.items()}
    if len(by_id) != len(vocab):
        raise ConversionError(f"{vocab_path}: two pieces share an id")
    setting = tokenizer_config.get("language_codes", "m2m100")
    if setting not in M2M100_LANGUAGES:
        raise ConversionError(f"{checkpoint}/tokenizer_config.json: unsupported language_codes={json.dumps(setting)} "
                              f"(known: {', '.join(M2M100_LANGUAGES)})")
    for index, code in enumerate(M2M100_LANGUAGES[setting]):
        by_id[len(vocab) + index] = f"__{code}__"
    return by_id, {code: f"__{code}__" for code in M2M100_LANGUAGES[setting]}


def piece_list(by_id, vocab_size, source):
    """Pieces in id order, padded to the embedding's rows with fairseq's madeup words (ids no tokenizer
    produces); refuses gaps, duplicates and a tokenizer larger than the model."""
    if max(by_id) >= vocab_size:
        raise ConversionError(f"{source}: token id {max(by_id)} is outside the model's {vocab_size} embedding rows")
    missing = [model_id for model_id in range(max(by_id) + 1) if model_id not in by_id]
    if missing:
        raise ConversionError(f"{source}: ids are not contiguous (first missing id: {missing[0]})")
    pieces = [by_id[model_id] for model_id in range(max(by_id) + 1)]
    taken = set(pieces)
    if len(taken) != len(pieces):
        raise ConversionError(f"{source}: a piece has two ids")
    index = 0
    while len(pieces) < vocab_size:
        name = MADEUP_WORD.format(index)
        index += 1
        if name not in taken:
            pieces.append(name)
    return pieces


def language_tokens(tokenizer_config, special_tokens_map):
    """The language codes of an NLLB or mBART-50 tokenizer: its extra (v5) or additional (v4) special tokens,
    which are the codes themselves."""
    for source in (tokenizer_config, special_tokens_map):
        for key in ("extra_special_tokens", "additional_special_tokens"):
            tokens = source.get(key)
            if tokens:
                tokens = [token.get("content") if isinstance(token, dict) else token for token in tokens]
                # transformers 5 saves MBart50Tokenizer's list with <s> and </s> in it: those are no codes.
                return [token for token in tokens if not (token.startswith("<") and token.endswith(">"))]
    return []


def tokenizer_setup(checkpoint, tokenizer_class, vocab_size):
    """(pieces, [(code, id)], placement, unk piece) for the checkpoint's tokenizer class."""
    tokenizer_config = read_json(checkpoint, "tokenizer_config.json", required=False) or {}
    special_tokens_map = read_json(checkpoint, "special_tokens_map.json", required=False) or {}
    if tokenizer_class.startswith("M2M100Tokenizer"):
        by_id, code_tokens = m2m100_pieces(checkpoint, tokenizer_config)
        pieces = piece_list(by_id, vocab_size, f"{checkpoint}/vocab.json")
    elif tokenizer_class.startswith(("NllbTokenizer", "MBart50Tokenizer")):
        code_tokens = {token: token for token in language_tokens(tokenizer_config, special_tokens_map)}
        if os.path.isfile(os.path.join(checkpoint, "tokenizer.json")):
            by_id = pieces_from_tokenizer_json(checkpoint)
            pieces = piece_list(by_id, vocab_size, f"{checkpoint}/tokenizer.json")
        else:
            by_id = fairseq_spm_pieces(checkpoint, read_bytes(checkpoint, "sentencepiece.bpe.model"), list(code_tokens))
            pieces = piece_list(by_id, vocab_size, f"{checkpoint}/sentencepiece.bpe.model")
    else:
        raise ConversionError(f"{checkpoint}/tokenizer_config.json: unsupported tokenizer_class="
                              f"{json.dumps(tokenizer_class)} (need NllbTokenizer, M2M100Tokenizer or MBart50Tokenizer)")
    index = {piece: model_id for model_id, piece in enumerate(pieces)}
    absent = [token for token in code_tokens.values() if token not in index]
    if absent:
        raise ConversionError(f"{checkpoint}: language token {absent[0]!r} is not in the vocabulary")
    if not code_tokens:
        raise ConversionError(f"{checkpoint}/tokenizer_config.json: no language codes found "
                              "(extra_special_tokens / additional_special_tokens)")
    codes = sorted(((code, index[token]) for code, token in code_tokens.items()), key=lambda entry: entry[1])
    legacy = tokenizer_class.startswith("NllbTokenizer") and tokenizer_config.get("legacy_behaviour", False)
    placement = pb.SOURCE_SUFFIX if legacy else pb.SOURCE_PREFIX
    unk = tokenizer_config.get("unk_token", "<unk>")
    unk = unk.get("content", "<unk>") if isinstance(unk, dict) else unk
    if unk not in index:
        raise ConversionError(f"{checkpoint}: the unknown piece {unk!r} is not in the vocabulary")
    return pieces, codes, placement, index[unk]


def tokenizer_class_of(checkpoint, architecture):
    tokenizer_config = read_json(checkpoint, "tokenizer_config.json", required=False) or {}
    name = tokenizer_config.get("tokenizer_class")
    if name:
        return name
    if architecture == "MBartForConditionalGeneration":
        return "MBart50Tokenizer"
    # An M2M-100 checkpoint without tokenizer_config.json: vocab.json marks M2M100Tokenizer.
    return "M2M100Tokenizer" if os.path.isfile(os.path.join(checkpoint, "vocab.json")) else "NllbTokenizer"


def check_special_ids(pieces, config, checkpoint):
    for setting, expected in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>")):
        model_id = single_id(config[setting])
        if not 0 <= model_id < len(pieces) or pieces[model_id] != expected:
            raise ConversionError(f"{checkpoint}/config.json: {setting}={model_id} is not {expected!r} in the tokenizer's "
                                  "vocabulary")


# --- the header -----------------------------------------------------------------------------------

def convert(checkpoint, config, dtype_name, architecture):
    """Returns (ModelHeader, [(name, float32 array)]) for an M2M-100, NLLB or mBART-50 checkpoint."""
    family, _, scale_default = FAMILY_DEFAULTS[architecture]
    mbart = architecture == "MBartForConditionalGeneration"
    generation = read_json(checkpoint, "generation_config.json", required=False) or {}
    activation = check_config(config, architecture)
    vocab_size = config["vocab_size"]
    tokenizer_class = tokenizer_class_of(checkpoint, architecture)
    pieces, codes, placement, unk_id = tokenizer_setup(checkpoint, tokenizer_class, vocab_size)
    check_special_ids(pieces, config, checkpoint)
    spm = read_bytes(checkpoint, "sentencepiece.bpe.model")
    weights = WeightTable(read_weights(checkpoint))
    tensors, shared, tied_output, output_bias = build_tensors(weights, config, mbart, vocab_size)

    pad_id = single_id(config["pad_token_id"])
    eos_id = single_id(config["eos_token_id"])
    start_id = generation.get("decoder_start_token_id", config.get("decoder_start_token_id", eos_id))
    header = pb.ModelHeader(format_version=FORMAT_VERSION)
    header.description = (f"converted from {os.path.basename(os.path.abspath(checkpoint))} (HF {architecture}, "
                          f"{tokenizer_class}, transformers {config.get('transformers_version', 'unknown')}) by "
                          f"convert_hf.py on {datetime.date.today().isoformat()}, {dtype_name}")
    model = header.config
    model.kind = pb.ENCODER_DECODER
    model.d_model = config["d_model"]
    set_stack(model.encoder, config, "encoder", True, True, mbart)
    set_stack(model.decoder, config, "decoder", True, True, mbart)
    model.activation = activation
    model.layer_norm_epsilon = LAYER_NORM_EPSILON
    if mbart:
        model.position_encoding = pb.LEARNED
        model.position_offset = 2   # MBartLearnedPositionalEmbedding.offset
    else:
        model.position_encoding = pb.SINUSOIDAL_FAIRSEQ
        model.position_offset = pad_id + 1   # create_position_ids_from_input_ids: padding_idx + 1 + index
    model.max_positions = config["max_position_embeddings"]
    model.embedding_scale = math.sqrt(config["d_model"]) if config.get("scale_embedding", scale_default) else 1.0
    model.shared_embeddings = shared
    model.tied_output = tied_output
    model.source_vocab_size = vocab_size
    model.target_vocab_size = vocab_size
    model.pad_id = pad_id
    model.eos_id = eos_id
    model.unk_id = unk_id
    model.decoder_start_id = start_id
    model.output_bias = output_bias
    # HF suppresses nothing for these families unless the checkpoint names bad_words_ids (pad included).
    model.suppressed_ids.extend(suppressed_ids(config, generation))
    for key, value in generation_defaults(config, generation, eos_id).items():
        setattr(header.generation, key, value)

    tokenizer = header.tokenizer
    tokenizer.source_spm = spm
    tokenizer.target_spm = spm
    tokenizer.source_vocab.extend(pieces)
    tokenizer.target_vocab.extend(pieces)
    for code, model_id in codes:
        tokenizer.language_codes.add(code=code, id=model_id)
    tokenizer.source_language = placement
    return header, tensors
