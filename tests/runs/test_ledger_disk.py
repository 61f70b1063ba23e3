"""Commands that only read the ledger read it on a read-only or a full disk (opened read-only
and saying why); commands that write say the disk is read-only or full -- never "move the file
aside (it may be corrupt)", which would lose the ledger. Real disks: tests/fs_faults.py."""

from __future__ import annotations

import sys

from finetune.runs.ledger import Ledger
from finetune.runs.run import Run
from tests.fs_faults import READ_ONLY, assert_clear_error, finetune_in

RUN = "ft-20250616-120000-abcd"
SEED = (
    "import sys; from pathlib import Path; from finetune.runs.ledger import Ledger; "
    "from finetune.runs.run import Run; "
    "led = Ledger(Path(sys.argv[1]) / 'ledger.sqlite'); "
    f"led.create(Run('{RUN}', 1.75e9, 'smoke', 'd', 'local', 'completed', {{}}, "
    "started_at=1.75e9, ended_at=1.75e9 + 42)); led.close()"
)
# a small disk holding a ledger with one run, then filled to the last block
FULL_WITH_LEDGER = (
    'mount -t tmpfs -o size=256k none "$D" && "$PY" -c "$SEED" "$D" && '
    '(head -c 1048576 /dev/zero > "$D/filler" 2>/dev/null || true)'
)


def _seed(folder):
    with Ledger(folder / "ledger.sqlite") as led:
        led.create(Run(RUN, 1.75e9, "smoke", "d", "local", "completed", {},
                       started_at=1.75e9, ended_at=1.75e9 + 42))  # fmt: skip


def _no_bad_advice(res):
    out = res.stdout + res.stderr
    assert "Traceback" not in out and "corrupt" not in out and "aside" not in out, out


def test_read_only_commands_read_a_ledger_on_a_read_only_disk(tmp_path):
    data = tmp_path / "data"
    _seed(data)
    env = {"FINETUNE_DATA_DIR": str(data)}
    for args in (["runs", "list"], ["runs", "show", RUN], ["cost-report"]):
        res = finetune_in(READ_ONLY, data, *args, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert RUN in res.stdout, res.stdout
        assert "read without writing" in res.stderr and "read-only" in res.stderr
        _no_bad_advice(res)
    show = finetune_in(READ_ONLY, data, "runs", "show", RUN, env=env)
    assert "wall 42s" in show.stdout  # one duration format: report.text.duration
    res = finetune_in(READ_ONLY, data, "runs", "rm", RUN, env=env)  # a writer is refused
    assert_clear_error(res, 3, "cannot be written", "read-only")


def test_a_full_disk_is_said_full_and_still_read(tmp_path):
    data = tmp_path / "full"
    data.mkdir()
    env = {"FINETUNE_DATA_DIR": str(data), "PY": sys.executable, "SEED": SEED}
    res = finetune_in(FULL_WITH_LEDGER, data, "runs", "rm", RUN, env=env)
    assert_clear_error(res, 3, "is full", "ENOSPC", "free some space")
    _no_bad_advice(res)
    for args in (["runs", "list"], ["runs", "show", RUN]):
        res = finetune_in(FULL_WITH_LEDGER, data, *args, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert RUN in res.stdout and "is full" in res.stderr
        _no_bad_advice(res)
