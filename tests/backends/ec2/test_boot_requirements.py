"""The lists the cloud installs with pip --require-hashes: finetune/backends/ec2/
boot-requirements.txt (the EC2 boot) is exactly the closure of our runtime requirements in this
environment, finetune/backends/metrics-requirements.txt (runs with metric loggers, EC2 and
SageMaker) that of the `metrics` extra minus the boot list; every package hashed, binary ones
for both architectures, both shipped inside our wheel."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from finetune.backends import shipping

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "finetune" / "backends" / "ec2" / "boot-requirements.txt"
METRICS_LOCK = ROOT / "finetune" / "backends" / "metrics-requirements.txt"


def _script():
    spec = importlib.util.spec_from_file_location(
        "lock_boot_requirements", ROOT / "scripts" / "lock_boot_requirements.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entries(lock: Path = LOCK) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a lock file."""
    text = lock.read_text().replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            pin, *options = line.split()
            name, version = pin.split("==")
            out[name] = (version, [o.removeprefix("--hash=sha256:") for o in options])
    return out


def test_the_lock_is_the_closure_of_our_requirements_in_this_environment():
    entries = _entries()
    assert sorted((n, v) for n, (v, _) in entries.items()) == _script().closure()
    assert {"boto3", "pydantic", "typer"} <= set(entries)  # the agent's and the CLI's
    assert not {"torch", "torchvision", "numpy"} & set(entries)  # the AMI's own


def test_the_metrics_lock_is_the_closure_of_the_metrics_extra_beyond_the_boot_lock():
    entries, boot = _entries(METRICS_LOCK), _entries()
    assert sorted((n, v) for n, (v, _) in entries.items()) == _script().metrics_closure()
    assert {"tensorboardx", "mlflow-skinny", "sqlalchemy", "alembic"} <= set(entries)
    for name in ("tensorboardx", "mlflow-skinny", "sqlalchemy", "alembic"):  # the extra's pins
        assert entries[name][0] == metadata.version(name), name
    assert not set(entries) & set(boot)  # the boot installed those already
    assert not {"torch", "torchvision", "numpy"} & set(entries)  # the AMI's and image's own
    # pip itself takes the file as it is given on an instance (--require-hashes --no-deps):
    # here every pin is already installed, so nothing is fetched (no index)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--require-hashes"]
    out = subprocess.run([*pip, "-r", str(METRICS_LOCK)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Would install" not in out.stdout  # the environment's versions, every one


@pytest.mark.parametrize("lock", [LOCK, METRICS_LOCK], ids=["boot", "metrics"])
def test_every_package_is_hashed_binary_ones_for_both_architectures(lock):
    for name, (_, hashes) in _entries(lock).items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name
        wheel = metadata.distribution(name).read_text("WHEEL") or ""
        if "Root-Is-Purelib: false" in wheel:  # compiled: x86_64 and aarch64 at least
            assert len(hashes) >= 2, name


def test_the_wheel_carries_the_locks():
    _, data = shipping.wheel()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.read("finetune/backends/ec2/boot-requirements.txt") == LOCK.read_bytes()
        assert zf.read("finetune/backends/metrics-requirements.txt") == METRICS_LOCK.read_bytes()
