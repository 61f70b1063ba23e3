"""The hashed lists the cloud installs with pip --require-hashes (finetune/backends/ec2/
boot-requirements.txt for the EC2 boot, finetune/backends/metrics-requirements.txt for runs with
metric loggers) travel inside our wheel, and pip takes them as an instance is given them.
What they contain is checked against the dev lock and the installed metadata in
tests/test_locks.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from finetune.backends import shipping

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "finetune" / "backends" / "ec2" / "boot-requirements.txt"
METRICS_LOCK = ROOT / "finetune" / "backends" / "metrics-requirements.txt"


def test_pip_takes_the_cloud_locks_as_given():
    # --require-hashes --no-deps, no index: every pin that applies here is already installed,
    # so nothing is fetched and the markers (the locks are universal) parse
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--require-hashes"]
    for lock in (LOCK, METRICS_LOCK):
        out = subprocess.run([*pip, "-r", str(lock)], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "Would install" not in out.stdout, out.stdout  # the environment's versions


def test_the_wheel_carries_the_locks():
    _, data = shipping.wheel()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.read("finetune/backends/ec2/boot-requirements.txt") == LOCK.read_bytes()
        assert zf.read("finetune/backends/metrics-requirements.txt") == METRICS_LOCK.read_bytes()
