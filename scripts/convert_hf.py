#!/usr/bin/env python3
"""Converts a Hugging Face checkpoint (translation or Llama-family) into a seqtrans model file (format version 3).

Usage: convert_hf.py CHECKPOINT_DIR OUTPUT_FILE [--dtype fp32|fp16]

The family comes from config.json (architectures, else model_type):
  MarianMTModel                    OPUS-MT: source.spm, target.spm, vocab.json [, target_vocab.json]
  M2M100ForConditionalGeneration   M2M-100 (sentencepiece.bpe.model + vocab.json) and NLLB-200
                                   (sentencepiece.bpe.model + tokenizer.json)
  MBartForConditionalGeneration    mBART-50 (sentencepiece.bpe.model + tokenizer.json)
  LlamaForCausalLM                 Llama-2, TinyLlama: decoder-only (tokenizer.model + tokenizer.json)
  MistralForCausalLM               Mistral without a sliding window (sliding_window null or >= max positions)
Weights: model.safetensors, a sharded safetensors index, or pytorch_model.bin (needs torch). Tensor names
and shapes follow proto/model.proto. Unsupported settings are refused with one line naming the setting.
"""
import argparse
import json
import os
import sys

from hf_common import ConversionError, read_json, write_converted
from seqtrans_file import DTYPE_BY_NAME, FormatError

# HF architecture -> (model_type, family module name).
ARCHITECTURES = {
    "MarianMTModel": "marian",
    "M2M100ForConditionalGeneration": "m2m_100",
    "MBartForConditionalGeneration": "mbart",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
}


def architecture_of(config):
    """The checkpoint's architecture: the first known name in architectures, else the one of model_type."""
    names = config.get("architectures") or []
    for name in names:
        if name in ARCHITECTURES:
            return name
    if names:
        raise ConversionError(f"config.json: unsupported architectures={json.dumps(names)} (supported: "
                              f"{', '.join(ARCHITECTURES)})")
    by_type = {model_type: name for name, model_type in ARCHITECTURES.items()}
    model_type = config.get("model_type")
    if model_type not in by_type:
        raise ConversionError(f"config.json: unsupported model_type={json.dumps(model_type)} (supported: "
                              f"{', '.join(by_type)})")
    return by_type[model_type]


def convert(checkpoint, output, dtype_name):
    if not os.path.isdir(checkpoint):
        raise ConversionError(f"{checkpoint}: checkpoint directory not found")
    config = read_json(checkpoint, "config.json")
    architecture = architecture_of(config)
    if config.get("model_type", ARCHITECTURES[architecture]) != ARCHITECTURES[architecture]:
        raise ConversionError(f"config.json: unsupported model_type={json.dumps(config.get('model_type'))} for "
                              f"{architecture} (need {ARCHITECTURES[architecture]!r})")
    if architecture == "MarianMTModel":
        import hf_marian
        header, tensors = hf_marian.convert(checkpoint, config, dtype_name)
    elif architecture in ("LlamaForCausalLM", "MistralForCausalLM"):
        import hf_llama
        header, tensors = hf_llama.convert(checkpoint, config, dtype_name, architecture)
    else:
        import hf_fairseq
        header, tensors = hf_fairseq.convert(checkpoint, config, dtype_name, architecture)
    write_converted(output, header, tensors, dtype_name)


def main(program="convert_hf"):
    parser = argparse.ArgumentParser(prog=f"{program}.py", description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="Hugging Face checkpoint directory (as the hub ships it)")
    parser.add_argument("output", help="seqtrans model file to write")
    parser.add_argument("--dtype", choices=sorted(DTYPE_BY_NAME), default="fp32",
                        help="data type of the stored weights (default: fp32)")
    args = parser.parse_args()
    try:
        convert(args.checkpoint, args.output, args.dtype)
    except (ConversionError, FormatError) as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
