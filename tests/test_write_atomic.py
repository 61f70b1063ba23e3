"""Issue 34, N11: write_atomic in a folder others can write. Its temporary name is
unpredictable and created exclusively, so a symlink planted where the old predictable name
(``.NAME.tmp-PID``) would be is never followed; a symlink at the target is replaced, not
written through; a file keeps its mode; a failed write leaves no temporary file behind."""

from __future__ import annotations

import os
import stat

import pytest

from finetune.files import write_atomic


def test_a_planted_symlink_is_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "config.json"
    os.symlink(victim, tmp_path / f".config.json.tmp-{os.getpid()}")  # the old temp name
    write_atomic(target, '{"a": 1}\n')
    assert victim.read_text() == "precious\n"
    assert target.read_text() == '{"a": 1}\n' and not target.is_symlink()


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / "status.json"
    target.symlink_to(victim)
    write_atomic(target, "new\n")
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == "new\n"


def test_modes_and_no_leftovers(tmp_path):
    target = tmp_path / "ledger-note.txt"
    target.write_text("old")
    os.chmod(target, 0o600)
    write_atomic(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.txt"
    write_atomic(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    with pytest.raises(TypeError):
        write_atomic(tmp_path / "bad.txt", b"bytes are not text")  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.txt", "ledger-note.txt"]
