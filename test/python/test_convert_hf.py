"""scripts/convert_hf.py on the tiny checkpoints in test/data: Marian, NLLB-200, M2M-100, mBART-50 and Llama layouts.

Needs numpy, protobuf and sentencepiece (the converter's own needs), not torch, transformers or the built
package: run with `python3 -m pytest test/python/test_convert_hf.py`.
"""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("google.protobuf")
spm = pytest.importorskip("sentencepiece")

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = REPOSITORY / "scripts"
DATA = REPOSITORY / "test" / "data"
sys.path.insert(0, str(SCRIPTS))

from seqtrans_file import load_tensors, pb, read_header  # noqa: E402

# name: (position encoding, offset, embedding norm, output bias, number of language codes, source code, target code)
FAMILIES = {
    "nllb_tiny": (pb.SINUSOIDAL_FAIRSEQ, 2, False, False, 3, "eng_Latn", "deu_Latn"),
    "m2m100_tiny": (pb.SINUSOIDAL_FAIRSEQ, 2, False, False, 100, "en", "de"),
    "mbart50_tiny": (pb.LEARNED, 2, True, True, 52, "en_XX", "de_DE"),
}


def convert(checkpoint, output, script="convert_hf.py", *extra):
    return subprocess.run([sys.executable, str(SCRIPTS / script), str(checkpoint), str(output), *extra],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Each tiny checkpoint converted once (fp32): {name: path}."""
    directory = tmp_path_factory.mktemp("converted")
    paths = {}
    for name in list(FAMILIES) + ["marian_tiny", "marian_separate"]:
        if not (DATA / name).is_dir():
            pytest.skip(f"test/data/{name} is missing (scripts/make_family_goldens.py makes it)")
        path = directory / f"{name}.seqtrans"
        result = convert(DATA / name, path)
        assert result.returncode == 0, result.stderr
        paths[name] = path
    return paths


def golden_rows(name):
    with open(DATA / "golden" / f"{name}_greedy.tsv", encoding="utf-8") as golden:
        settings = dict(item.split("=", 1) for item in golden.readline()[2:].split() if "=" in item)
        rows = [line.rstrip("\n").split("\t") for line in golden]
    return settings, rows


@pytest.mark.parametrize("name", list(FAMILIES))
def test_multilingual_header(converted, name):
    encoding, offset, embedding_norm, output_bias, code_count, source, target = FAMILIES[name]
    header, tensors = load_tensors(converted[name])
    config = header.config
    assert header.format_version == 3
    assert config.kind == pb.ENCODER_DECODER
    assert config.position_encoding == encoding and config.position_offset == offset
    for stack in (config.encoder, config.decoder):
        assert stack.pre_norm and stack.final_layer_norm
        assert stack.embedding_layer_norm == embedding_norm
    assert (config.pad_id, config.eos_id, config.unk_id, config.decoder_start_id) == (1, 2, 3, 2)
    assert list(config.suppressed_ids) == []  # HF suppresses nothing for these families by default
    assert config.output_bias == output_bias
    assert config.embedding_scale == pytest.approx(config.d_model ** 0.5)
    pieces = list(header.tokenizer.source_vocab)
    assert pieces == list(header.tokenizer.target_vocab)
    assert len(pieces) == config.source_vocab_size == config.target_vocab_size
    assert pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert len(set(pieces)) == len(pieces)
    codes = {entry.code: entry.id for entry in header.tokenizer.language_codes}
    assert len(codes) == code_count and source in codes and target in codes
    assert header.tokenizer.source_language == pb.SOURCE_PREFIX
    for stack in ("encoder", "decoder"):
        assert f"{stack}/final_norm/gamma" in tensors
        assert (f"{stack}/embedding_norm/gamma" in tensors) == embedding_norm
        if encoding == pb.LEARNED:
            assert tensors[f"{stack}/position_embedding"].shape == (config.max_positions + offset, config.d_model)
    assert "shared/embedding" in tensors and config.shared_embeddings and config.tied_output
    assert tensors["decoder/layer_0/self_attention/qkv/weight"].shape == (3 * config.d_model, config.d_model)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_golden_settings_match_the_file(converted, name):
    """The goldens' language ids are the file's language codes."""
    header, _ = read_header(converted[name])
    codes = {entry.code: entry.id for entry in header.tokenizer.language_codes}
    settings, rows = golden_rows(name)
    assert int(settings["forced_bos_token_id"]) == codes[settings["target_lang"]]
    source_id = codes[settings["source_lang"]]
    for row in rows:
        ids = [int(value) for value in row[1].split()]
        assert ids[0] == source_id and ids[-1] == header.config.eos_id
        output = [int(value) for value in row[2].split()]
        assert output[0] == codes[settings["target_lang"]]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_piece_list_reproduces_hf_source_ids(converted, name):
    """SentencePiece pieces looked up by text in the file's piece list (unknown -> unk), framed as
    [source code] ids [eos], give HF's source ids on every golden line, as the C++ tokenizer computes them."""
    header, _ = read_header(converted[name])
    processor = spm.SentencePieceProcessor(model_proto=header.tokenizer.source_spm)
    index = {piece: model_id for model_id, piece in enumerate(header.tokenizer.source_vocab)}
    codes = {entry.code: entry.id for entry in header.tokenizer.language_codes}
    settings, rows = golden_rows(name)
    differing = []
    for line_number, row in enumerate(rows, start=2):
        ids = [index.get(piece, header.config.unk_id) for piece in processor.encode(row[0], out_type=str)]
        if [codes[settings["source_lang"]]] + ids + [header.config.eos_id] != [int(v) for v in row[1].split()]:
            differing.append(line_number)
    assert differing == []


def test_marian_unchanged(converted):
    header, tensors = load_tensors(converted["marian_tiny"])
    assert header.format_version == 3 and header.config.kind == pb.ENCODER_DECODER
    assert header.config.position_encoding == pb.SINUSOIDAL_SPLIT and header.config.position_offset == 0
    assert list(header.config.suppressed_ids) == [header.config.pad_id]
    assert not header.tokenizer.language_codes
    assert header.tokenizer.source_language == pb.LANGUAGE_PLACEMENT_UNSPECIFIED
    separate, separate_tensors = load_tensors(converted["marian_separate"])
    assert not separate.config.shared_embeddings and not separate.config.tied_output
    assert "decoder/output/weight" in separate_tensors


def test_convert_marian_is_another_name(tmp_path, converted):
    result = convert(DATA / "marian_tiny", tmp_path / "alias.seqtrans", "convert_marian.py")
    assert result.returncode == 0, result.stderr
    alias, alias_tensors = load_tensors(tmp_path / "alias.seqtrans")
    original, original_tensors = load_tensors(converted["marian_tiny"])
    assert alias.config == original.config and alias.tokenizer == original.tokenizer
    assert all(np.array_equal(alias_tensors[name], original_tensors[name]) for name in original_tensors)


def test_unsupported_architecture_is_refused_in_one_line(tmp_path):
    checkpoint = tmp_path / "t5"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"architectures": ["T5ForConditionalGeneration"],
                                                        "model_type": "t5"}))
    result = convert(checkpoint, tmp_path / "out.seqtrans")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "T5ForConditionalGeneration" in lines[0] and "config.json" in lines[0]
    assert not (tmp_path / "out.seqtrans").exists()


def test_nllb_legacy_behaviour_places_the_code_after_eos(tmp_path):
    checkpoint = tmp_path / "nllb_legacy"
    shutil.copytree(DATA / "nllb_tiny", checkpoint)
    tokenizer_config = json.loads((checkpoint / "tokenizer_config.json").read_text())
    tokenizer_config["legacy_behaviour"] = True
    (checkpoint / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    result = convert(checkpoint, tmp_path / "legacy.seqtrans")
    assert result.returncode == 0, result.stderr
    header, _ = read_header(tmp_path / "legacy.seqtrans")
    assert header.tokenizer.source_language == pb.SOURCE_SUFFIX


def write_safetensors(path, tensors):
    """A minimal safetensors writer (F32), so that the test needs no safetensors package."""
    import struct
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def test_marian_untied_shared_uses_each_stacks_own_table(tmp_path):
    """transformers 5: tie_word_embeddings=false leaves the encoder's and decoder's embed_tokens and lm_head
    untied even with share_encoder_decoder_embeddings=true; each stack embeds with its own table."""
    from hf_common import read_weights
    checkpoint = tmp_path / "marian_untied"
    shutil.copytree(DATA / "marian_tiny", checkpoint)
    weights = dict(read_weights(str(checkpoint)))
    shared = weights.pop("model.shared.weight")
    encoder, decoder, output = shared + 1.0, shared - 1.0, shared * 2.0
    weights.update({"model.shared.weight": shared, "model.encoder.embed_tokens.weight": encoder,
                    "model.decoder.embed_tokens.weight": decoder, "lm_head.weight": output})
    write_safetensors(checkpoint / "model.safetensors", weights)
    config = json.loads((checkpoint / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (checkpoint / "config.json").write_text(json.dumps(config))
    result = convert(checkpoint, tmp_path / "untied.seqtrans")
    assert result.returncode == 0, result.stderr
    header, tensors = load_tensors(tmp_path / "untied.seqtrans")
    assert not header.config.shared_embeddings and not header.config.tied_output
    assert np.array_equal(tensors["encoder/embedding"], encoder)
    assert np.array_equal(tensors["decoder/embedding"], decoder)
    assert np.array_equal(tensors["decoder/output/weight"], output)


def test_mbart50_without_tokenizer_json_derives_the_same_ids(tmp_path, converted):
    """fairseq's rule (pieces shifted by one after <s> <pad> </s> <unk>, then the codes, then <mask>) gives
    the ids of mBART-50's tokenizer.json."""
    checkpoint = tmp_path / "mbart50_spm_only"
    shutil.copytree(DATA / "mbart50_tiny", checkpoint)
    (checkpoint / "tokenizer.json").unlink()
    result = convert(checkpoint, tmp_path / "spm_only.seqtrans")
    assert result.returncode == 0, result.stderr
    derived, _ = read_header(tmp_path / "spm_only.seqtrans")
    expected, _ = read_header(converted["mbart50_tiny"])
    assert list(derived.tokenizer.source_vocab) == list(expected.tokenizer.source_vocab)
    assert list(derived.tokenizer.language_codes) == list(expected.tokenizer.language_codes)


# --- decoder-only: LlamaForCausalLM (scripts/make_llama_goldens.py makes the checkpoints) -----------

# name: the space prefix the tokenizer's settings imply (legacy=true: "always")
LLAMAS = {"llama_tiny_mha": pb.SPACE_PREFIX_FIRST, "llama_tiny_gqa2": pb.SPACE_PREFIX_FIRST,
          "llama_tiny_gqa4": pb.SPACE_PREFIX_FIRST, "llama_tiny_bias": pb.SPACE_PREFIX_ALWAYS}


@pytest.fixture(scope="module")
def converted_llamas(tmp_path_factory):
    directory = tmp_path_factory.mktemp("llamas")
    paths = {}
    for name in LLAMAS:
        if not (DATA / name).is_dir():
            pytest.skip(f"test/data/{name} is missing (scripts/make_llama_goldens.py makes it)")
        path = directory / f"{name}.seqtrans"
        result = convert(DATA / name, path)
        assert result.returncode == 0, result.stderr
        paths[name] = path
    return paths


def hf_config(name):
    return json.loads((DATA / name / "config.json").read_text())


@pytest.mark.parametrize("name", list(LLAMAS))
def test_llama_config_round_trips(converted_llamas, name):
    header, tensors = load_tensors(converted_llamas[name])
    hf = hf_config(name)
    config, stack = header.config, header.config.decoder
    heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // heads
    assert header.format_version == 3 and config.kind == pb.DECODER_ONLY
    assert (config.d_model, stack.num_layers, stack.num_heads, stack.num_kv_heads, stack.head_dim, stack.ffn_dim) == (
        hf["hidden_size"], hf["num_hidden_layers"], heads, hf["num_key_value_heads"], head_dim, hf["intermediate_size"])
    assert stack.pre_norm and stack.final_layer_norm and not stack.embedding_layer_norm
    assert not config.HasField("encoder") and config.source_vocab_size == 0
    assert config.target_vocab_size == hf["vocab_size"]
    assert config.norm == pb.RMS_NORM and config.layer_norm_epsilon == pytest.approx(hf["rms_norm_eps"])
    assert config.position_encoding == pb.ROTARY
    assert config.rope_theta == pytest.approx(hf["rope_parameters"]["rope_theta"])
    assert config.max_positions == hf["max_position_embeddings"]
    assert config.activation == pb.SWISH and config.gated_ffn and config.embedding_scale == 1.0
    assert config.tied_output == hf["tie_word_embeddings"] and not config.shared_embeddings
    assert config.no_attention_bias == (not hf["attention_bias"]) and config.no_ffn_bias == (not hf["mlp_bias"])
    assert (config.bos_id, config.eos_id, config.unk_id, config.decoder_start_id) == (1, 2, 0, 1)
    assert list(config.suppressed_ids) == [] and not config.output_bias
    assert header.tokenizer.add_bos and header.tokenizer.space_prefix == LLAMAS[name]
    assert not header.tokenizer.source_spm and not header.tokenizer.source_vocab and not header.tokenizer.target_vocab
    assert not header.HasField("generation") or not header.generation.HasField("max_length")
    queries, keys = heads * head_dim, hf["num_key_value_heads"] * head_dim
    assert tensors["decoder/layer_0/self_attention/qkv/weight"].shape == (queries + 2 * keys, hf["hidden_size"])
    assert tensors["decoder/layer_0/ffn/inner/weight"].shape == (2 * hf["intermediate_size"], hf["hidden_size"])
    assert ("decoder/output/weight" in tensors) == (not hf["tie_word_embeddings"])
    assert ("decoder/layer_1/self_attention/qkv/bias" in tensors) == hf["attention_bias"]
    assert ("decoder/layer_1/ffn/outer/bias" in tensors) == hf["mlp_bias"]


@pytest.mark.parametrize("name", list(LLAMAS))
def test_llama_tensors_are_hf_weights_fused(converted_llamas, name):
    """q, k, v rows stacked as stored (no rotary permutation), gate rows before up rows."""
    from hf_common import read_weights
    _, tensors = load_tensors(converted_llamas[name])
    weights = read_weights(str(DATA / name))
    layer = "model.layers.1"
    qkv = np.concatenate([weights[f"{layer}.self_attn.{p}_proj.weight"] for p in "qkv"])
    assert np.array_equal(tensors["decoder/layer_1/self_attention/qkv/weight"], qkv)
    gate_up = np.concatenate([weights[f"{layer}.mlp.gate_proj.weight"], weights[f"{layer}.mlp.up_proj.weight"]])
    assert np.array_equal(tensors["decoder/layer_1/ffn/inner/weight"], gate_up)
    assert np.array_equal(tensors["decoder/layer_1/ffn/outer/weight"], weights[f"{layer}.mlp.down_proj.weight"])
    assert np.array_equal(tensors["decoder/final_norm/gamma"], weights["model.norm.weight"])
    assert np.array_equal(tensors["decoder/embedding"], weights["model.embed_tokens.weight"])
    if "decoder/output/weight" in tensors:
        assert np.array_equal(tensors["decoder/output/weight"], weights["lm_head.weight"])


def test_llama_tokenizer_model_is_stored_without_normalizer(converted_llamas):
    from sentencepiece import sentencepiece_model_pb2
    header, _ = read_header(converted_llamas["llama_tiny_mha"])
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(header.tokenizer.target_spm)
    spec = model.normalizer_spec
    assert (spec.name, spec.precompiled_charsmap, spec.add_dummy_prefix, spec.remove_extra_whitespaces) == (
        "identity", b"", False, False)
    original = spm.SentencePieceProcessor(model_file=str(DATA / "llama_tiny_mha" / "tokenizer.model"))
    stored = spm.SentencePieceProcessor(model_proto=header.tokenizer.target_spm)
    assert [stored.id_to_piece(i) for i in range(stored.get_piece_size())] == [
        original.id_to_piece(i) for i in range(original.get_piece_size())]
    assert stored.encode("  Ein Mann") == original.encode(" Ein Mann")  # the dummy prefix is the caller's


def llama_variant(tmp_path, name="llama_tiny_mha", config=None, tokenizer_config=None, tokenizer_json=None):
    """A copy of a tiny Llama checkpoint with some settings replaced (None values removed)."""
    checkpoint = tmp_path / "variant"
    shutil.copytree(DATA / name, checkpoint)
    for file_name, changes in (("config.json", config), ("tokenizer_config.json", tokenizer_config),
                               ("tokenizer.json", tokenizer_json)):
        if changes:
            document = json.loads((checkpoint / file_name).read_text())
            document.update(changes)
            document = {key: value for key, value in document.items() if value is not None}
            (checkpoint / file_name).write_text(json.dumps(document))
    return checkpoint


def refusal(tmp_path, checkpoint):
    result = convert(checkpoint, tmp_path / "out.seqtrans")
    assert result.returncode == 1
    assert not (tmp_path / "out.seqtrans").exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("setting, value", [
    ("rope_scaling", {"rope_type": "linear", "factor": 2.0}),
    ("rope_scaling", {"type": "dynamic", "factor": 2.0}),
    ("rope_parameters", {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0}),
    ("rope_parameters", {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
])
def test_llama_rope_other_than_default_is_refused_in_one_line(tmp_path, setting, value):
    changes = {"rope_parameters": None, setting: value}
    line = refusal(tmp_path, llama_variant(tmp_path, config=changes))
    assert f"unsupported {setting}=" in line and "config.json" in line


def test_llama_old_style_rope_theta_is_read(tmp_path):
    checkpoint = llama_variant(tmp_path, config={"rope_parameters": None, "rope_scaling": None,
                                                 "rope_theta": 250000.0})
    result = convert(checkpoint, tmp_path / "old.seqtrans")
    assert result.returncode == 0, result.stderr
    header, _ = read_header(tmp_path / "old.seqtrans")
    assert header.config.rope_theta == 250000.0


def test_mistral_needs_no_sliding_window(tmp_path):
    mistral = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "attention_bias": None,
               "mlp_bias": None}
    line = refusal(tmp_path, llama_variant(tmp_path, config=dict(mistral, sliding_window=128)))
    assert "sliding_window=128" in line and "max_position_embeddings=256" in line
    for window in (None, 256):
        checkpoint = llama_variant(tmp_path / str(window), config=dict(mistral, sliding_window=window))
        result = convert(checkpoint, tmp_path / "mistral.seqtrans")
        assert result.returncode == 0, result.stderr
        assert read_header(tmp_path / "mistral.seqtrans")[0].config.kind == pb.DECODER_ONLY


@pytest.mark.parametrize("architecture", ["Qwen2ForCausalLM", "GPT2LMHeadModel", "GemmaForCausalLM"])
def test_other_decoder_only_architectures_are_refused_by_name(tmp_path, architecture):
    line = refusal(tmp_path, llama_variant(tmp_path, config={"architectures": [architecture]}))
    assert architecture in line and "config.json" in line


@pytest.mark.parametrize("changes, prefix", [({"legacy": True}, pb.SPACE_PREFIX_ALWAYS),
                                             ({"legacy": False}, pb.SPACE_PREFIX_FIRST),
                                             ({"add_prefix_space": False}, pb.SPACE_PREFIX_NEVER)])
def test_llama_tokenizer_settings_choose_the_space_prefix(tmp_path, changes, prefix):
    checkpoint = llama_variant(tmp_path, tokenizer_config=changes)
    result = convert(checkpoint, tmp_path / "prefix.seqtrans")
    assert result.returncode == 0, result.stderr
    assert read_header(tmp_path / "prefix.seqtrans")[0].tokenizer.space_prefix == prefix


def test_llama_tokenizer_json_decides_bos(tmp_path):
    single = [{"Sequence": {"id": "A", "type_id": 0}}]
    checkpoint = llama_variant(tmp_path, tokenizer_json={"post_processor": {"type": "TemplateProcessing",
                                                                            "single": single, "pair": single,
                                                                            "special_tokens": {}}})
    result = convert(checkpoint, tmp_path / "nobos.seqtrans")
    assert result.returncode == 0, result.stderr
    assert not read_header(tmp_path / "nobos.seqtrans")[0].tokenizer.add_bos
    eos_last = single + [{"SpecialToken": {"id": "</s>", "type_id": 0}}]
    line = refusal(tmp_path, llama_variant(tmp_path / "eos", tokenizer_json={"post_processor": {
        "type": "TemplateProcessing", "single": eos_last, "pair": eos_last, "special_tokens": {}}}))
    assert "unsupported post_processor" in line and "tokenizer.json" in line


def test_llama_unsupported_settings_are_refused_in_one_line(tmp_path):
    line = refusal(tmp_path, llama_variant(tmp_path / "kv", config={"num_key_value_heads": 3}))
    assert "num_key_value_heads=3" in line
    line = refusal(tmp_path, llama_variant(tmp_path / "eos", config={"eos_token_id": [2, 5]}))
    assert "eos_token_id=[2, 5]" in line
    line = refusal(tmp_path, llama_variant(tmp_path / "class", tokenizer_config={"tokenizer_class": "GemmaTokenizer"}))
    assert "tokenizer_class" in line
    document = json.loads((DATA / "llama_tiny_mha" / "tokenizer.json").read_text())
    added = document["added_tokens"] + [dict(document["added_tokens"][0], id=999, content="<pad>")]
    line = refusal(tmp_path, llama_variant(tmp_path / "added", tokenizer_json={"added_tokens": added}))
    assert "added_tokens" in line
