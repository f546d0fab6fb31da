"""seqtrans: fast neural machine translation and text generation with Transformer models, from Python.

    >>> import seqtrans
    >>> translator = seqtrans.Translator()          # the bundled English-German model
    >>> translator.translate_batch(["Hello."])[0].text
"""

import os as _os

from . import _preload

_preload.load()

from ._seqtrans import Error, Hypothesis, TranslationResult, Translator, __version__
from .generator import Generation, Generator

__all__ = ["Error", "Generation", "Generator", "Hypothesis", "TranslationResult", "Translator", "__version__",
           "bundled_model_path", "default_model_path"]


def bundled_model_path() -> str:
    """The English-German demo model that ships in the package."""
    return _os.path.join(_os.path.dirname(__file__), "models", "opus-demo-en-de.seqtrans")


def default_model_path() -> str:
    """The model a Translator loads when given none: $SEQTRANS_MODEL (as the CLI), else the bundled one."""
    return _os.environ.get("SEQTRANS_MODEL") or bundled_model_path()
