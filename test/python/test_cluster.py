"""The Ray Data recipe (seqtrans.cluster, docs/CLUSTER.md) on a local Ray cluster: two CPU workers, the
bundled model, a few hundred lines in several blocks; every line must come back once, in input order."""

import os
import random
import signal

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install .[ray] (scripts/test.sh does)")

import seqtrans  # noqa: E402
from seqtrans import cluster  # noqa: E402

from conftest import golden_sources  # noqa: E402


def corpus(count: int) -> list:
    """Short generated sentences (each a different line), golden lines, and blank lines among them."""
    rng = random.Random(13)
    subjects = ["The man", "A woman", "Two dogs", "The children", "My friend", "A small cat", "The teacher"]
    verbs = ["is reading", "walks to", "likes", "is painting", "looks at", "finds", "buys"]
    objects = ["a book", "the park", "the red ball", "a new house", "the river", "an apple", "the garden"]
    lines = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} number {i}." for i in range(count)]
    for i, golden in enumerate(golden_sources(12)):
        lines.insert(25 * i + 7, golden)
    for i in range(0, len(lines), 50):
        lines.insert(i, "")
    return lines


@pytest.fixture(scope="module")
def local_cluster():
    # Four logical CPUs on the two cores: one per Translator actor, and room for the read and write tasks,
    # which would otherwise wait for CPUs the actors hold (docs/CLUSTER.md).
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def deadline():
    """Fails a test still running after 5 minutes (a stalled pipeline) instead of hanging CI."""
    def expire(signum, frame):
        raise TimeoutError("the Ray pipeline did not finish within 300 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(300)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_the_recipe_loses_and_reorders_no_line(local_cluster, deadline, tmp_path):
    lines = corpus(300)
    shards = [tmp_path / "corpus.000.en", tmp_path / "corpus.001.en"]  # a sharded corpus: two files
    half = len(lines) // 2
    shards[0].write_text("".join(line + "\n" for line in lines[:half]), encoding="utf-8")
    shards[1].write_text("".join(line + "\n" for line in lines[half:]), encoding="utf-8")
    output = tmp_path / "out"

    search = {"beam_size": 1}
    cluster.translate_corpus([str(shard) for shard in shards], str(output), workers=2, gpus_per_worker=0,
                             batch_size=40, blocks=6, translator_options={"device": "cpu", "threads": 1},
                             search_options=search)

    files = sorted(os.listdir(output))
    assert len(files) >= 2, files  # several write tasks: their names carry the order
    written = []
    for name in files:
        with open(output / name, encoding="utf-8") as part:
            written += part.read().splitlines()
    expected = [r.text for r in seqtrans.Translator(device="cpu").translate_batch(lines, **search)]
    assert len(written) == len(lines)
    assert written == expected
    # Position by position, the numbered lines keep their number (the demo model garbles about one in seven).
    numbered = [(line.split("number ")[1].rstrip("."), out) for line, out in zip(lines, written) if "number " in line]
    assert len(numbered) == 300
    assert sum(number in out for number, out in numbered) >= 0.75 * len(numbered)
