"""Writers and the command line under kills and unwritable places: a save
killed (SIGKILL) leaves its temporary file, which the next save into the
folder removes; SIGTERM during ``bnpcore corpus`` removes the partial
directory as Ctrl-C does (exit 143); ``-o`` into a place where no file can
be created fails before the fit (also as root, where ``os.access`` says yes);
a default ``--heldout`` that holds out no token warns and exits 0."""
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from bnpcore import cli, lda
from bnpcore.corpus import Corpus, write

CHILD_SAVE = """
import sys, time
import numpy as np
import bnpcore.base
from bnpcore import lda
model = lda.CollapsedGibbs(n_components=2, max_iter=2, random_state=0).fit(np.ones((3, 4), dtype=int))
def stuck(*args, **kwargs):
    print("saving", flush=True)
    time.sleep(60)
bnpcore.base.np.savez_compressed = stuck
model.save(sys.argv[1])
"""

CHILD_CORPUS = """
import sys, time
import bnpcore.corpus_io
add = bnpcore.corpus_io.CorpusWriter.add
def slow_add(self, *args):
    add(self, *args)
    print("writing", flush=True)
    time.sleep(60)
bnpcore.corpus_io.CorpusWriter.add = slow_add
from bnpcore.cli import main
sys.exit(main(["corpus", sys.argv[1], sys.argv[2]]))
"""


def wait_for_line(proc, text):
    line = proc.stdout.readline()
    assert text in line, line


def test_a_killed_save_leaves_a_file_the_next_save_removes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", CHILD_SAVE, str(tmp_path / "m.npz")], stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)     # cwd: not the source tree, which -c would import
    try:
        wait_for_line(proc, "saving")
    finally:
        proc.kill()
        proc.wait()
    left = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(left) == 1 and f".{proc.pid}." in left[0], left
    lda.CollapsedGibbs(n_components=2, max_iter=2, random_state=0).fit(np.ones((3, 4), dtype=int)).save(
        tmp_path / "other.npz")
    assert sorted(os.listdir(tmp_path)) == ["other.npz"]


def test_leftovers_of_running_writers_and_other_files_are_kept(tmp_path):
    for name in (f".bnpcore.{os.getppid()}.abcd1234.tmp", ".bnpcore.notapid.abcd1234.tmp", "x.123.abcd1234.tmp",
                 ".mine.tmp"):
        (tmp_path / name).write_text("")
    before = sorted(os.listdir(tmp_path))
    lda.CollapsedGibbs(n_components=2, max_iter=2, random_state=0).fit(np.ones((3, 4), dtype=int)).save(
        tmp_path / "m.npz")
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["m.npz"])


def test_sigterm_during_bnpcore_corpus_removes_the_partial_directory(tmp_path):
    source = tmp_path / "docword.txt"
    source.write_text("2\n3\n3\n1 1 2\n1 2 1\n2 3 4\n")
    proc = subprocess.Popen([sys.executable, "-c", CHILD_CORPUS, str(source), str(tmp_path / "c")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_for_line(proc, "writing")
        assert any(n.endswith(".partial") for n in os.listdir(tmp_path))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated" in err
    assert sorted(os.listdir(tmp_path)) == ["docword.txt"]


def test_a_killed_corpus_writer_leaves_a_directory_the_next_write_removes(tmp_path):
    source = tmp_path / "docword.txt"
    source.write_text("2\n3\n3\n1 1 2\n1 2 1\n2 3 4\n")
    proc = subprocess.Popen([sys.executable, "-c", CHILD_CORPUS, str(source), str(tmp_path / "c")],
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        wait_for_line(proc, "writing")
    finally:
        proc.kill()
        proc.wait()
    assert any(n.endswith(".partial") for n in os.listdir(tmp_path))
    write(Corpus(np.ones((2, 3), dtype=int)), tmp_path / "d")
    assert sorted(os.listdir(tmp_path)) == ["d", "docword.txt"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_output_where_no_file_can_be_created_fails_before_fitting(capsys):
    # /proc: os.access(W_OK) is true for root, but no file can be created there
    status = cli.main(["fit", "--data", "bars", "--model", "lda-cgs", "-p", "max_iter=2", "-q",
                       "-o", "/proc/bnpcore-model.npz"])
    out, err = capsys.readouterr()
    assert status == 2
    assert "cannot save the model to /proc/bnpcore-model.npz" in err
    assert "fitted" not in out


def test_a_default_heldout_without_tokens_warns_and_exits_0(tmp_path, capsys):
    (tmp_path / "docword.txt").write_text("3\n4\n3\n1 1 1\n2 2 1\n3 4 1\n")     # one token per document
    status = cli.main(["fit", "--data", str(tmp_path / "docword.txt"), "--model", "lda-cgs", "-p", "max_iter=2",
                       "-p", "n_components=2", "-q", "-o", str(tmp_path / "m.npz")])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "warning" in err and "no token" in err
    assert (tmp_path / "m.npz").is_file()


def test_a_save_that_fails_after_the_fit_falls_back_to_a_named_file(tmp_path, capsys, monkeypatch):
    import errno
    import tempfile
    import bnpcore.base
    target = tmp_path / "m.npz"
    save = bnpcore.base.BaseEstimator.save

    def full_disk(self, path, **kwargs):
        if os.fspath(path) == os.fspath(target):
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(self, path, **kwargs)
    monkeypatch.setattr(bnpcore.base.BaseEstimator, "save", full_disk)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "fallback"))
    (tmp_path / "fallback").mkdir()
    status = cli.main(["fit", "--data", "bars", "--model", "lda-cgs", "-p", "max_iter=2", "-q", "-o", str(target)])
    err = capsys.readouterr().err
    assert status == 2 and "No space left on device" in err and "saved it to" in err
    (saved,) = os.listdir(tmp_path / "fallback")
    assert saved in err and saved.endswith(".npz")
