"""Atomic checkpoints: complete ones are found, torn or half-written ones are not, and the
best-validation one survives rotation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from finetune.train.checkpoints import BEST, COMPLETE, CheckpointDir

PARAMS = "model.params"


def _writer(payload: bytes = b"weights" * 100):
    """An engine's write callback: two files, like parameters and optimizer state."""

    def write(folder: Path) -> None:
        (folder / PARAMS).write_bytes(payload)
        (folder / "trainer.states").write_bytes(payload[::-1])

    return write


def test_save_then_latest_round_trips(tmp_path):
    ckpts = CheckpointDir(tmp_path)
    assert ckpts.latest() is None
    saved = ckpts.save(_writer(b"abc"), {"step": 7})
    latest = ckpts.latest()
    assert latest.directory == saved.directory == tmp_path / "ckpt-000001"
    assert latest.state == {"step": 7}
    assert latest.path(PARAMS).read_bytes() == b"abc"


def test_keeps_the_two_newest(tmp_path):
    ckpts = CheckpointDir(tmp_path)
    for step in range(4):
        ckpts.save(_writer(), {"step": step})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000003", "ckpt-000004"]
    assert ckpts.latest().state == {"step": 3}


def test_the_best_checkpoint_survives_rotation(tmp_path):
    ckpts = CheckpointDir(tmp_path)
    ckpts.save(_writer(b"first"), {"step": 0})
    ckpts.save(_writer(b"best"), {"step": 1}, best=True)
    for step in range(2, 6):
        ckpts.save(_writer(), {"step": step})
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ckpt-"))
    assert names == ["ckpt-000002", "ckpt-000005", "ckpt-000006"]
    assert ckpts.best().state == {"step": 1}
    assert ckpts.best().path(PARAMS).read_bytes() == b"best"
    assert (tmp_path / BEST).read_text().strip() == "ckpt-000002"
    ckpts.save(_writer(), {"step": 6}, best=True)  # a newer best frees the old one
    ckpts.save(_writer(), {"step": 7})
    ckpts.save(_writer(), {"step": 8})
    assert not (tmp_path / "ckpt-000002").exists()
    assert ckpts.best().state == {"step": 6}


def test_torn_or_unmarked_checkpoints_are_skipped(tmp_path):
    ckpts = CheckpointDir(tmp_path)
    ckpts.save(_writer(), {"step": 1})
    newest = ckpts.save(_writer(), {"step": 2}, best=True).directory
    with open(newest / PARAMS, "r+b") as f:  # a partial copy, e.g. from S3
        f.truncate(10)
    assert ckpts.latest().state == {"step": 1}
    assert ckpts.best() is None  # a torn best is no best
    (newest / COMPLETE).unlink()  # killed before the marker
    assert ckpts.latest().state == {"step": 1}
    # the next save gets a fresh number and becomes the newest
    assert ckpts.save(_writer(), {"step": 3}).directory.name == "ckpt-000003"
    assert ckpts.latest().state == {"step": 3}


def test_temporaries_of_a_killed_process_are_removed(tmp_path):
    stale = tmp_path / ".tmp-ckpt-000001-999999"
    stale.mkdir()
    (stale / "model.params").write_bytes(b"half")
    ours = tmp_path / f".tmp-ckpt-000002-{os.getpid()}"
    ours.mkdir()
    CheckpointDir(tmp_path)
    assert not stale.exists() and ours.exists()


def test_complete_marker_records_every_file_size(tmp_path):
    saved = CheckpointDir(tmp_path).save(_writer(), {"step": 1})
    record = json.loads((saved.directory / COMPLETE).read_text())
    assert set(record["files"]) == {PARAMS, "trainer.states", "state.json"}
    assert record["files"][PARAMS] == (saved.directory / PARAMS).stat().st_size


def test_a_damaged_newest_checkpoint_is_skipped_for_the_one_before(tmp_path):
    """Issue 34, item 6 (damaged checkpoint, then --resume): a file of the right size with
    other bytes (a bit flip, a bad copy back from S3) fails its sha256: resuming takes the
    checkpoint before it, not a load error whose way out was to start again."""
    ckpts = CheckpointDir(tmp_path)
    ckpts.save(_writer(b"first" * 50), {"step": 1})
    newest = ckpts.save(_writer(b"second" * 50), {"step": 2})
    data = bytearray((newest.directory / PARAMS).read_bytes())
    data[10] ^= 0x01
    (newest.directory / PARAMS).write_bytes(bytes(data))
    latest = ckpts.latest()
    assert latest.state == {"step": 1} and latest.directory.name == "ckpt-000001"


_FULL_DISK = """
import json, sys
from pathlib import Path
from finetune.errors import DataError
from finetune.train.checkpoints import CheckpointDir
ckpts = CheckpointDir(Path(sys.argv[1]) / "checkpoints")
ckpts.save(lambda f: (f / "w").write_bytes(b"x" * 1000), {"step": 1})
try:
    ckpts.save(lambda f: (f / "w").write_bytes(b"y" * 4_000_000), {"step": 2})
except DataError as exc:
    print(json.dumps({"error": str(exc), "latest": ckpts.latest().state,
                      "left": sorted(p.name for p in ckpts.directory.iterdir())}))
"""


def test_a_full_disk_while_checkpointing_keeps_the_earlier_ones(tmp_path):
    """Issue 34, item 6 (disk full during a checkpoint write), on a real file system that
    fills up: a 512 KiB tmpfs in a private mount namespace (as tests/fs_faults.py does)."""
    import subprocess
    import sys

    folder = tmp_path / "disk"
    folder.mkdir()
    script = 'mount -t tmpfs -o size=512k none "$D" && exec "$@"'
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"]
    res = subprocess.run(
        [*cmd, sys.executable, "-c", _FULL_DISK, str(folder)],
        env={**os.environ, "D": str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    out = json.loads(res.stdout)
    assert "no space left" in out["error"] and "earlier checkpoints are intact" in out["error"]
    assert "To fix:" in out["error"]
    assert out["latest"] == {"step": 1} and out["left"] == ["ckpt-000001"]
