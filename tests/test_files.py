"""tachyon._files.write_text_atomic: the old file or the new one, never half, and no temporary file left."""

import os

import pytest

from tachyon._files import write_text_atomic


def test_write_text_atomic_replaces_and_leaves_nothing(tmp_path):
    path = tmp_path / "config.json"
    write_text_atomic(path, "first")
    write_text_atomic(path, "second")
    assert path.read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_write_text_atomic_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    write_text_atomic(path, "old")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
