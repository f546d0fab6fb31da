#!/usr/bin/env python3
"""Converts a Hugging Face MarianMT checkpoint into a seqtrans model file: another name for convert_hf.py.

Usage: convert_marian.py CHECKPOINT_DIR OUTPUT_FILE [--dtype fp16|fp32]
Kept so that existing commands and tests work; convert_hf.py also reads M2M-100, NLLB-200 and mBART-50.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convert_hf import main  # noqa: E402

if __name__ == "__main__":
    main("convert_marian")
