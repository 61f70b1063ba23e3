"""Issue 49, item 7: the disk fills up while the torch engine writes a checkpoint. torch's
own writer reports it as a RuntimeError ("[enforce fail at inline_container.cc] ..."), not
as ENOSPC: the run's failure still says the disk is full and what to do, the half-written
checkpoint is gone, and the run resumes from its last complete one once there is room.

A real full disk: a tmpfs in a private mount namespace (as tests/fs_faults.py does), sized
to hold one checkpoint but not two, then made larger for the resume."""

from __future__ import annotations

import subprocess
import sys

import pytest

from finetune.contracts.metrics import read as read_metrics

from ...conftest import REPO, hparams, make_tree, trainer_env

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two real trainings

# The trainer twice in one mount namespace: on a tmpfs that holds one checkpoint of
# resnet18 (8 classes: 11.2 M float32 weights and as many SGD momenta, 86 MiB) but not two,
# then on the same tmpfs remounted larger, which keeps its files. Between the two: the exit code,
# the failure file and the checkpoint folder's names (the tmpfs goes with the namespace).
SCRIPT = """
mount -t tmpfs -o size=$ONE none "$D" || exit 99
"$@"; echo "first-exit=$?"
echo "failure: $(cat "$F")"; echo "left: $(ls -A "$D" | tr '\\n' ' ')"
mount -o remount,size=$THREE "$D" || exit 98
"$@"; echo "second-exit=$?"
"""


def test_a_full_disk_during_a_torch_checkpoint_says_so_and_the_run_resumes(tmp_path, tiny_dataset):
    hp = hparams(engine="torch", model="resnet18", loader_workers=0, optimizer="sgd",
                 epochs=2, max_batches_per_epoch=2)  # fmt: skip
    root = make_tree(tmp_path / "ml", tiny_dataset, hp, checkpoint_local_path=None)
    ckpts = root / "checkpoints"  # the trainer's default checkpoint folder
    ckpts.mkdir()
    failure = root / "output" / "failure"
    env = trainer_env(root, D=str(ckpts), F=str(failure), ONE="140m", THREE="400m")
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", SCRIPT, "sh"]
    res = subprocess.run([*cmd, sys.executable, "-m", "finetune.train"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "second-exit=0" in out, out
    first, second = out.split("first-exit=")
    assert not second.startswith("0"), out
    (reason,) = [line for line in second.splitlines() if line.startswith("failure: ")]
    assert "no space left on the disk holding the checkpoints" in reason, reason
    assert "the earlier checkpoints are intact" in reason, reason
    assert "Traceback" not in first and "unexpected error" not in reason, out
    assert "To fix: free space on that disk" in out and "resume the run" in out, out
    (left,) = [line for line in second.splitlines() if line.startswith("left: ")]
    assert left.split() == ["left:", "BEST", "ckpt-000001"], left  # the torn one is gone
    # started again with room: it resumed from that checkpoint and finished
    assert "finetune-resume" in second.split("left: ")[1], out
    assert (root / "model" / "model.pt").exists()
    assert [e.epoch for e in read_metrics(root / "output" / "data" / "metrics.jsonl")] == [0, 1]
