"""Corrupted on-disk corpora: every file of a ``bnpcore.corpus.write``
directory altered at the same size (word ids, counts and row pointers set
out of range or to other in-range values, bytes flipped, entries swapped,
the metadata and the vocabulary changed), each alteration also with the
checksums of meta.json recomputed (an attacker who knows the format), then
``Corpus.open`` and a short fit in a child process with a memory limit and a
timeout (_isolated.py). A case passes with a ValueError naming the corpus, or,
where the alteration leaves a valid corpus (in-range values whose checksum
was recomputed), with a clean fit; a crash, a kill, a hang, another exception
type, or an invalid corpus accepted fails.

The default run fits lda.StandardVB, hdp.TruncationFreeSVI, lda.CollapsedGibbs
and lda.PartiallyCollapsedGibbs in turn; ``-m slow`` adds random byte flips
at 200 seeds and every registered estimator on the accepted corpora.
"""
import collections
import importlib.util
import json
import os
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from bnpcore import registry
from bnpcore.corpus import Corpus, write

_spec = importlib.util.spec_from_file_location("bnpcore_fuzz_isolated", Path(__file__).with_name("_isolated.py"))
_isolated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_isolated)

ESTIMATORS = ["lda-svb", "hdp-tf-svi", "lda-cgs", "lda-pcgs"]
DTYPES = {"indptr": "<i8", "indices": "<i4", "counts": "<i4"}
STATS = collections.Counter()


@pytest.fixture(scope="module")
def worker():
    w = _isolated.Worker()
    yield w
    w.close()


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    print("\ncorrupted corpora:", dict(STATS))


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    rng = np.random.default_rng(1)
    counts = rng.poisson(0.6, size=(30, 25))
    counts[:, 0] += 1                  # no empty document
    path = tmp_path_factory.mktemp("corpora") / "original"
    write(Corpus(counts, vocabulary=[f"w{i}" for i in range(25)]), path)
    return path


def arrays(path):
    return {name: np.fromfile(path / f"{name}.bin", dtype=dtype) for name, dtype in DTYPES.items()}


def recompute_checksums(path):
    meta = json.loads((path / "meta.json").read_text())
    meta["crc32"] = {name: zlib.crc32(a.view(np.uint8)) for name, a in arrays(path).items()}
    (path / "meta.json").write_text(json.dumps(meta))


def set_entry(name, index, value):
    def alter(path):
        a = arrays(path)[name]
        a[index if index >= 0 else len(a) + index] = value
        a.tofile(path / f"{name}.bin")
    return alter


def edit_meta(fn):
    def alter(path):
        meta = json.loads((path / "meta.json").read_text())
        fn(meta)
        (path / "meta.json").write_text(json.dumps(meta))
    return alter


def flip_bytes(name, seed, n=16):
    def alter(path):
        raw = bytearray((path / f"{name}.bin").read_bytes())
        rng = np.random.default_rng(seed)
        for i in rng.choice(len(raw), size=min(n, len(raw)), replace=False):
            raw[i] ^= int(rng.integers(1, 256))
        (path / f"{name}.bin").write_bytes(bytes(raw))
    return alter


def swap(name, i, j):
    def alter(path):
        a = arrays(path)[name]
        a[[i, j]] = a[[j, i]]
        a.tofile(path / f"{name}.bin")
    return alter


def alterations(original):
    """(label, does the alteration stay refused when the checksums are recomputed?, alter(path))."""
    a = arrays(original)
    meta = json.loads((original / "meta.json").read_text())
    W, nnz = meta["n_words"], meta["nnz"]
    mid = nnz // 2
    # indices.bin: out of range, and in range but no longer increasing within the document
    for value in (2 ** 30, -5, W, -(2 ** 31)):
        yield f"indices[{mid}] = {value}", True, set_entry("indices", mid, value)
    yield "indices[1] = indices[0]", True, set_entry("indices", 1, int(a["indices"][0]))
    yield "indices[-1] = 0", True, set_entry("indices", -1, 0)
    yield "indices: two entries of a document swapped", True, swap("indices", 0, 1)
    yield "indices[0] = 0 (in range, same order)", False, set_entry("indices", 0, 0 if a["indices"][0] else 0)
    # counts.bin
    for value in (-7, 0, -(2 ** 31)):
        yield f"counts[{mid}] = {value}", True, set_entry("counts", mid, value)
    yield f"counts[{mid}] = 2**31 - 1", True, set_entry("counts", mid, 2 ** 31 - 1)    # n_tokens disagrees
    yield f"counts[{mid}] + 1", True, set_entry("counts", mid, int(a["counts"][mid]) + 1)
    yield "counts: two entries swapped", False, swap("counts", 0, mid)
    # indptr.bin
    for index, value in ((5, 10 ** 12), (5, -1), (5, int(a["indptr"][7])), (-1, nnz - 1), (0, 1)):
        yield f"indptr[{index}] = {value}", True, set_entry("indptr", index, value)
    yield "indptr: two pointers swapped", True, swap("indptr", 3, 9)
    # every file: 16 flipped bytes
    for name in DTYPES:
        yield f"{name}.bin: 16 bytes flipped", name != "counts", flip_bytes(name, 0)
    # meta.json
    yield "meta n_tokens + 1", True, edit_meta(lambda m: m.update(n_tokens=m["n_tokens"] + 1))
    yield "meta n_words - 1", True, edit_meta(lambda m: m.update(n_words=m["n_words"] - 1))
    yield "meta n_words + 1 (vocabulary of n_words)", True, edit_meta(lambda m: m.update(n_words=m["n_words"] + 1))
    yield "meta n_docs - 1", True, edit_meta(lambda m: m.update(n_docs=m["n_docs"] - 1))
    yield "meta nnz = 10**12", True, edit_meta(lambda m: m.update(nnz=10 ** 12))
    yield "meta nnz + 1", True, edit_meta(lambda m: m.update(nnz=m["nnz"] + 1))
    yield "meta n_tokens = -1", True, edit_meta(lambda m: m.update(n_tokens=-1))
    yield "meta n_docs = 'x'", True, edit_meta(lambda m: m.update(n_docs="x"))
    yield "meta n_words = 2**31", True, edit_meta(lambda m: m.update(n_words=2 ** 31))
    yield "meta format_version = 99", True, edit_meta(lambda m: m.update(format_version=99))
    yield "meta format = 'x'", True, edit_meta(lambda m: m.update(format="x"))
    yield "meta vocabulary = false (a valid corpus without words)", False, edit_meta(
        lambda m: m.update(vocabulary=False))
    yield "meta a list", True, lambda p: (p / "meta.json").write_text("[1, 2]")
    yield "meta crc32 altered", None, edit_meta(lambda m: m["crc32"].update(indices=m["crc32"]["indices"] ^ 1))
    yield "meta crc32 = 'x'", None, edit_meta(lambda m: m.update(crc32="x"))
    yield "meta without crc32 (older corpora)", False, edit_meta(lambda m: m.pop("crc32"))
    yield "meta.json not JSON", True, lambda p: (p / "meta.json").write_bytes(b"{\x00\xff")
    yield "meta.json missing", True, lambda p: (p / "meta.json").unlink()
    # vocabulary.json
    yield "vocabulary.json missing", True, lambda p: (p / "vocabulary.json").unlink()
    yield "vocabulary.json not JSON", True, lambda p: (p / "vocabulary.json").write_text("[\"a\", ")
    yield "vocabulary.json not UTF-8", True, lambda p: (p / "vocabulary.json").write_bytes(b"[\"\xff\"]")
    yield "vocabulary.json one word short", True, lambda p: (p / "vocabulary.json").write_text(
        json.dumps([f"w{i}" for i in range(W - 1)]))
    yield "vocabulary.json of numbers", True, lambda p: (p / "vocabulary.json").write_text(json.dumps(list(range(W))))
    yield "vocabulary.json a FIFO", True, lambda p: ((p / "vocabulary.json").unlink(),
                                                     os.mkfifo(p / "vocabulary.json"))
    for name in ("meta.json", "indices.bin"):
        yield f"{name} a FIFO", True, lambda p, name=name: ((p / name).unlink(), os.mkfifo(p / name))
    yield "vocabulary.json a directory", True, lambda p: ((p / "vocabulary.json").unlink(),
                                                          (p / "vocabulary.json").mkdir())


def judge(case, answer, refuse, label):
    STATS["cases"] += 1
    outcome = answer["outcome"]
    if outcome in ("died", "timeout", "unexpected"):
        STATS[outcome] += 1
        pytest.fail(f"{label}: {outcome}: {answer}")
    if outcome == "error":
        STATS["clear errors"] += 1
        if answer["type"] != "ValueError":          # Corpus.open documents ValueError for every corruption
            STATS["errors of another type"] += 1
            pytest.fail(f"{label}: {answer['type']} instead of a ValueError: {answer}")
        if case["corpus"] not in answer["message"]:
            STATS["unclear errors"] += 1
            pytest.fail(f"{label}: the error does not name the corpus: {answer}")
    elif refuse:
        STATS["silent acceptances"] += 1
        pytest.fail(f"{label}: the corrupted corpus was accepted")
    else:
        STATS["clean runs"] += 1


def run_cases(cases, original, tmp_path, worker, estimators):
    failures = []
    for i, (label, refuse, alter) in enumerate(cases):
        for recomputed in (False, True):
            path = tmp_path / f"c{i}{'r' * recomputed}"
            shutil.copytree(original, path)
            alter(path)
            if recomputed:
                if not (path / "meta.json").is_file() or not all((path / f"{n}.bin").is_file() for n in DTYPES):
                    continue
                try:
                    recompute_checksums(path)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue        # the alteration made meta.json unreadable: the first round covers it
            must = (refuse is not False) if not recomputed else bool(refuse)
            case = {"kind": "open", "corpus": os.fspath(path), "estimator": estimators[i % len(estimators)]}
            try:
                judge(case, worker.run(case), must, f"{label}{' (checksums recomputed)' * recomputed}")
            except pytest.fail.Exception as exc:
                failures.append(str(exc))
            shutil.rmtree(path, ignore_errors=True)
    assert not failures, "\n".join(failures)


def test_the_untouched_corpus_opens_and_fits(original, worker):
    for name in ESTIMATORS:
        answer = worker.run({"kind": "open", "corpus": os.fspath(original), "estimator": name})
        assert answer == {"outcome": "ok"}, (name, answer)


def test_corrupted_corpora_are_refused_by_name(original, tmp_path, worker):
    cases = list(alterations(original))
    assert len(cases) > 30
    run_cases(cases, original, tmp_path, worker, ESTIMATORS)


@pytest.mark.slow
def test_random_byte_flips_are_refused_by_name(original, tmp_path, worker):
    cases = [(f"{name}.bin: 16 bytes flipped (seed {seed})", name != "counts", flip_bytes(name, seed))
             for seed in range(1, 201) for name in DTYPES]
    run_cases(cases, original, tmp_path, worker, ESTIMATORS)


@pytest.mark.slow
def test_corrupted_corpora_every_estimator(original, tmp_path, worker):
    run_cases(list(alterations(original)), original, tmp_path, worker, registry.names())
