"""Persistence, progress reports and parameters of bnpcore.base, on the
test-only estimators of conftest.py."""
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

import bnpcore
from bnpcore.base import FORMAT_VERSION, load


@pytest.fixture
def kmeans(toy_models):
    return toy_models["toy-kmeans"]


@pytest.fixture
def fitted(tiny_corpus, kmeans):
    return kmeans.make(test=True, random_state=0).fit(tiny_corpus)


def _rewrite_meta(src, dst, change):
    with np.load(src) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    change(meta)
    np.savez(dst, __meta__=np.array(json.dumps(meta)), **arrays)


def test_load_is_public():
    assert bnpcore.load is load


def test_round_trip_of_nested_values_and_generators(fitted, tiny_corpus, tmp_path):
    gen = np.random.default_rng(5)
    gen.random(3)
    fitted.history_.append({"iteration": 99, "counts": np.arange(3, dtype=np.int16),
                            "k": np.int64(4), "x": np.float32(0.5), "pair": (1, "a")})
    fitted.extra_ = {"nested": [np.array([[1.5, 2.0]]), None, True, [(2.0, 3.0)]]}
    fitted.set_params(random_state=gen)
    fitted.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    rec = loaded.history_[-1]
    assert rec["counts"].dtype == np.int16 and rec["counts"].tolist() == [0, 1, 2]
    assert rec["k"] == 4 and rec["x"] == 0.5 and rec["pair"] == (1, "a")
    np.testing.assert_array_equal(loaded.extra_["nested"][0], [[1.5, 2.0]])
    assert loaded.extra_["nested"][1:] == [None, True, [(2.0, 3.0)]]
    assert isinstance(loaded.random_state, np.random.Generator)
    assert loaded.random_state.random() == gen.random()    # same stream position


def test_private_resume_state_is_saved(tiny_corpus, tmp_path, toy_models):
    est = toy_models["toy-online-kmeans"].make(test=True, random_state=1).partial_fit(tiny_corpus[:10])
    est.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded._nkw, est._nkw)
    assert loaded._rng.random() == est._rng.random()
    assert loaded._stop is False          # _after_load ran


def test_file_is_written_exactly_at_path_with_umask_permissions(fitted, tmp_path):
    path = tmp_path / "model.bin"
    fitted.save(path)
    assert os.listdir(tmp_path) == ["model.bin"]
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask
    assert isinstance(load(path), type(fitted))


def test_unsaveable_attribute_leaves_existing_file_alone(fitted, tmp_path):
    path = tmp_path / "model.npz"
    fitted.save(path)
    before = path.read_bytes()
    fitted.bad_ = object()
    with pytest.raises(TypeError, match="bad_"):
        fitted.save(path)
    fitted.bad_ = {1: "int keys"}
    with pytest.raises(TypeError, match="bad_"):
        fitted.save(path)
    fitted.bad_ = np.array([object()])
    with pytest.raises(TypeError, match="bad_"):
        fitted.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.npz"]


def test_failed_write_leaves_existing_file_alone(fitted, tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    fitted.save(path)
    before = path.read_bytes()

    def broken(fh, **arrays):
        fh.write(b"partial")
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez_compressed", broken)
    with pytest.raises(OSError, match="disk full"):
        fitted.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.npz"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.npz")


@pytest.mark.parametrize("content", [b"", b"hello\n", b"PK\x03\x04garbage"])
def test_garbage_files_are_not_models(tmp_path, content):
    path = tmp_path / "x.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a bnpcore model file"):
        load(path)


def test_truncated_model_is_not_a_model(fitted, tmp_path):
    fitted.save(tmp_path / "m.npz")
    data = (tmp_path / "m.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a bnpcore model file"):
        load(tmp_path / "cut.npz")


def test_foreign_numpy_files_are_not_models(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    np.save(tmp_path / "b.npy", np.arange(3))
    with zipfile.ZipFile(tmp_path / "c.npz", "w") as z:
        z.writestr("__meta__.npy", b"not an npy")
    for name in ("a.npz", "b.npy", "c.npz"):
        with pytest.raises(ValueError, match="not a bnpcore model file"):
            load(tmp_path / name)


def test_other_format_versions_are_refused(fitted, tmp_path):
    fitted.save(tmp_path / "m.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "new.npz", lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match="newer bnpcore"):
        load(tmp_path / "new.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "bad.npz", lambda m: m.pop("class"))
    with pytest.raises(ValueError, match="bad metadata"):
        load(tmp_path / "bad.npz")


@pytest.mark.parametrize("cls", ["os:system", "bnpcore.base:os.system", "bnpcore.nosuchmodule:Model",
                                 "bnpcore.base:TopicMixin"])
def test_only_bnpcore_estimators_are_instantiated(fitted, tmp_path, cls):
    fitted.save(tmp_path / "m.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "evil.npz", lambda m: m.update({"class": cls}))
    with pytest.raises(ValueError, match="not a bnpcore estimator"):
        load(tmp_path / "evil.npz")


def test_saved_parameters_must_fit_the_class(fitted, tmp_path):
    fitted.save(tmp_path / "m.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "p.npz", lambda m: m["params"].update(gone=1))
    with pytest.raises(ValueError, match="saved parameters"):
        load(tmp_path / "p.npz")


def test_report_and_nested_callbacks(tiny_corpus, kmeans):
    est = kmeans.make(test=True, random_state=0)
    outer, inner = [], []
    with est.reporting(lambda e, r: outer.append(r["iteration"])):
        with est.reporting(lambda e, r: inner.append(r["iteration"])):
            est.fit(tiny_corpus)
        assert est._callback is not None           # the outer callback is back
        est.fit(tiny_corpus)
    assert "_callback" not in vars(est)
    assert inner == outer == [r["iteration"] for r in est.history_]
    rec = est.history_[0]
    assert set(rec) == {"iteration", "n_documents", "fit_seconds", "n_components", "loglik"} and type(rec["loglik"]) is float
    with est.reporting(print):
        assert "_callback" not in vars(pickle.loads(pickle.dumps(est)))


def test_report_converts_numpy_scalars(kmeans):
    est = kmeans.make()
    assert est._report(1, a=np.float64(1.5), b=np.int32(2)) is False
    assert est.history_ == [{"iteration": 1, "a": 1.5, "b": 2}]
    assert type(est.history_[0]["b"]) is int


def test_repr_shows_changed_parameters(kmeans):
    est = kmeans.make(n_components=7, alpha=1.0)
    assert repr(est) == "DocumentKMeans(max_iter=50, n_components=7)"


def test_nested_arrays_are_file_members_and_format_1_files_still_load(fitted, tiny_corpus, tmp_path):
    fitted.history_.append({"iteration": 99, "block": np.arange(6.0).reshape(2, 3)})
    fitted.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as data:
        nested = [k for k in data.files if k.startswith("n:")]
        meta = json.loads(str(data["__meta__"]))
    assert nested and meta["format_version"] == FORMAT_VERSION == 2
    np.testing.assert_array_equal(load(tmp_path / "m.npz").history_[-1]["block"], np.arange(6.0).reshape(2, 3))

    def as_format_1(meta):      # the same value as format 1 wrote it: a JSON list
        meta["format_version"] = 1
        meta["attrs"]["history_"][-1]["block"] = {"__ndarray__": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]],
                                                  "dtype": "<f8", "shape": [2, 3]}
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "v1.npz", as_format_1)
    old = load(tmp_path / "v1.npz")
    np.testing.assert_array_equal(old.history_[-1]["block"], np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(old.transform(tiny_corpus), fitted.transform(tiny_corpus))


def test_loading_never_imports_a_module_named_in_the_file(fitted, tmp_path, monkeypatch):
    """A file naming bnpcore.__main__ ran the command line (SystemExit) at import."""
    import sys
    monkeypatch.delitem(sys.modules, "bnpcore.__main__", raising=False)
    fitted.save(tmp_path / "m.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "main.npz", lambda m: m.update({"class": "bnpcore.__main__:main"}))
    with pytest.raises(ValueError, match="not a bnpcore estimator"):
        load(tmp_path / "main.npz")
    assert "bnpcore.__main__" not in sys.modules


@pytest.mark.parametrize("name", ["transform", "_callback", "__class__", "not an identifier_"])
def test_unknown_attributes_are_refused(fitted, tmp_path, name):
    fitted.save(tmp_path / "m.npz")
    _rewrite_meta(tmp_path / "m.npz", tmp_path / "bad.npz", lambda m: m["attrs"].update({name: 1}))
    with pytest.raises(ValueError, match=r"not a bnpcore model file: .*bad\.npz \(unknown attribute"):
        load(tmp_path / "bad.npz")


def test_a_file_with_python_objects_is_not_a_model(tmp_path):
    np.savez(tmp_path / "obj.npz", __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"not a bnpcore model file: .*obj\.npz \(it holds Python objects\)"):
        load(tmp_path / "obj.npz")


def test_training_one_estimator_from_two_threads_is_refused(tiny_corpus):
    """A second thread's partial_fit while a fit runs raised broadcast errors (or corrupted the state)."""
    import threading
    from bnpcore.mixture import TruncationFreeSVI
    est = TruncationFreeSVI(batch_size=5, n_epochs=2, random_state=0)
    inside, release, errors = threading.Event(), threading.Event(), []

    def wait_once(e, rec):
        if not inside.is_set():
            inside.set()
            release.wait(10)
        return False

    def train():
        with est.reporting(wait_once):
            est.fit(tiny_corpus)
    worker = threading.Thread(target=train)
    worker.start()
    assert inside.wait(10)
    try:
        est.partial_fit(tiny_corpus[:5])
    except RuntimeError as exc:
        errors.append(str(exc))
    release.set()
    worker.join(10)
    assert errors and "not thread-safe" in errors[0]
    assert "_fitting" not in vars(est) and np.all(np.isfinite(est.topics_))
    est.partial_fit(tiny_corpus[:5])                  # afterwards the same thread may train again
