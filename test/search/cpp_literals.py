"""C++ literals for the generated test case headers (hf_crosscheck_cases.h, hf_reference_cases.h)."""

import math


def cpp_float(value):
    """A float literal that reads back as the same fp32 value; infinities as kInf."""
    value = float(value)
    if math.isinf(value):
        return "-kInf" if value < 0 else "kInf"
    if value == int(value):
        return f"{value:.1f}f"
    return f"{value!r}f"


def cpp_list(values, format_value=str):
    return "{" + ", ".join(format_value(v) for v in values) + "}"


def stopping_name(stopping):
    """HF's early_stopping as seqtrans' BeamStopping."""
    return {False: "BeamStopping::Heuristic", True: "BeamStopping::FirstComplete", "never": "BeamStopping::Never"}[
        stopping
    ]
