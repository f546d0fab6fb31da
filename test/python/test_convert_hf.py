"""scripts/convert_hf.py on the tiny checkpoints in test/data: Marian, NLLB-200, M2M-100 and mBART-50 layouts.

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
    assert header.format_version == 2
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
    assert header.format_version == 2 and header.config.kind == pb.ENCODER_DECODER
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
