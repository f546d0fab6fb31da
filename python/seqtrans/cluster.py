"""Translating a sharded corpus on a Ray cluster with Ray Data (docs/CLUSTER.md): read_text, map_batches with
one Translator actor per GPU, and a text sink whose files, in name order, hold the translations in input
order. Needs the optional extra: pip install .[ray]

    python -m seqtrans.cluster --input 's3://bucket/corpus/*.en' --output s3://bucket/corpus.de/ \\
        --workers 16 --gpus-per-worker 1 -m model.seqtrans --beam-size 4
"""

import argparse
from typing import Any, Dict, List, Optional, Union

import numpy as np
import ray
from ray.data.block import BlockAccessor
from ray.data.datasource import BlockBasedFileDatasink

import seqtrans


class TranslatorActor:
    """One Translator per Ray actor: the model loads once per worker, then translates batch after batch."""

    def __init__(self, model_path: Optional[str], translator_options: Dict[str, Any], search_options: Dict[str, Any]):
        self.translator = seqtrans.Translator(model_path, **translator_options)
        self.search_options = search_options

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        results = self.translator.translate_batch(list(batch["text"]), **self.search_options)
        return {"translation": np.array([result.text for result in results], dtype=object)}


class TextDatasink(BlockBasedFileDatasink):
    """Writes a column one value per line (newlines inside a value become spaces, as the CLI writes)."""

    def __init__(self, path: str, column: str = "translation"):
        super().__init__(path, file_format="txt")
        self.column = column

    def write_block_to_file(self, block: BlockAccessor, file) -> None:
        lines = (str(value).replace("\r", " ").replace("\n", " ") + "\n" for value in block.to_pandas()[self.column])
        file.write("".join(lines).encode("utf-8"))


def translate_corpus(inputs: Union[str, List[str]], output: str, *, model_path: Optional[str] = None,
                     workers: int = 1, gpus_per_worker: float = 1, cpus_per_worker: float = 1,
                     batch_size: int = 4096, blocks: Optional[int] = None,
                     translator_options: Optional[Dict[str, Any]] = None,
                     search_options: Optional[Dict[str, Any]] = None) -> None:
    """Translates every line of `inputs` (files, directories or globs Ray reads, blank lines kept) into text
    files under `output`; read in file-name order, they hold one translation per input line, in input order.
    `workers` Translator actors run at once, each with `gpus_per_worker` GPUs (0: CPU workers)."""
    # Blocks leave each stage in input order, so the write tasks' indices (and file names) follow it.
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    lines = ray.data.read_text(inputs, drop_empty_lines=False, override_num_blocks=blocks)
    translations = lines.map_batches(
        TranslatorActor,
        fn_constructor_kwargs={"model_path": model_path, "translator_options": translator_options or {},
                               "search_options": search_options or {}},
        batch_size=batch_size, concurrency=workers, num_gpus=gpus_per_worker, num_cpus=cpus_per_worker)
    translations.write_datasink(TextDatasink(output))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Translate a corpus on a Ray cluster (docs/CLUSTER.md).")
    parser.add_argument("--input", required=True, nargs="+", help="text files, directories or globs (local, s3://, gs://)")
    parser.add_argument("--output", required=True, help="directory for the translated files")
    parser.add_argument("-m", "--model", default=None, help="model file (default: the bundled demo model)")
    parser.add_argument("--workers", type=int, default=1, help="Translator actors: one per GPU of the cluster")
    parser.add_argument("--gpus-per-worker", type=float, default=1, help="0 for CPU workers")
    parser.add_argument("--batch-size", type=int, default=4096, help="lines per map_batches call")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("-b", "--beam-size", type=int, default=None)
    parser.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local one)")
    arguments = parser.parse_args(argv)
    ray.init(address=arguments.address)
    translate_corpus(arguments.input, arguments.output, model_path=arguments.model, workers=arguments.workers,
                     gpus_per_worker=arguments.gpus_per_worker, batch_size=arguments.batch_size,
                     translator_options={"device": arguments.device, "precision": arguments.precision},
                     search_options={"beam_size": arguments.beam_size})


if __name__ == "__main__":
    main()
