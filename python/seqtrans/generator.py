"""seqtrans.Generator: completions from a decoder-only model (Llama family), on the same engine as Translator."""

from dataclasses import dataclass
from typing import List, Optional, Sequence

from ._seqtrans import Translator


@dataclass(frozen=True)
class Generation:
    """A prompt's completion: its text (cut before the first stop string) and the tokens generated (EOS excluded)."""

    text: str
    tokens: int


class Generator:
    """A loaded decoder-only model on one or more devices.

    >>> generator = seqtrans.Generator("tiny-llama.seqtrans")
    >>> generator.generate_batch(["English: A dog runs.\\nGerman:"], max_new_tokens=32)[0].text

    Keyword arguments are Translator's (device, precision, threads, batching, max_batch_size, ...).
    """

    def __init__(self, model_path: str, **engine_options):
        self._engine = Translator(model_path, **engine_options)
        if self._engine.model_kind != "decoder-only":
            raise ValueError(f"{model_path!r} is an encoder-decoder translation model: use seqtrans.Translator")

    def generate_batch(self, prompts: Sequence[str], *, max_new_tokens: int = 256,
                       stop: Optional[Sequence[str]] = None, **search_options) -> List[Generation]:
        """Completes each prompt; result i belongs to prompts[i]. A prompt may span several lines.

        max_new_tokens: tokens to generate at most, EOS included (Hugging Face's max_new_tokens).
        stop: strings a completion ends before (its text is cut at the first one found).
        Other keyword arguments are Translator.translate_batch's search settings (beam_size, sampling_topk,
        sampling_topp, temperature, seed, repetition_penalty, ...). An empty prompt gives "".
        """
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        results = self._engine.translate_batch(list(prompts), max_length=[max_new_tokens, 0], **search_options)
        return [Generation(_cut_at_stop(result.text, stop or ()), result.hypotheses[0].tokens) for result in results]

    @property
    def device(self) -> str:
        return self._engine.device

    @property
    def model_path(self) -> str:
        return self._engine.model_path


def _cut_at_stop(text: str, stops: Sequence[str]) -> str:
    found = [text.find(stop) for stop in stops if stop and stop in text]
    return text[: min(found)] if found else text
