"""The list the EC2 boot installs with pip --require-hashes (finetune/backends/ec2/
boot-requirements.txt): exactly the closure of our runtime requirements in this environment,
every package hashed, binary ones for both DLAMI architectures, shipped inside our wheel."""

from __future__ import annotations

import importlib.util
import io
import re
import zipfile
from importlib import metadata
from pathlib import Path

from finetune.backends import shipping

ROOT = Path(__file__).resolve().parents[3]
LOCK = ROOT / "finetune" / "backends" / "ec2" / "boot-requirements.txt"


def _script():
    spec = importlib.util.spec_from_file_location(
        "lock_boot_requirements", ROOT / "scripts" / "lock_boot_requirements.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entries() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of the lock file."""
    text = LOCK.read_text().replace("\\\n", " ")
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


def test_every_package_is_hashed_binary_ones_for_both_architectures():
    for name, (_, hashes) in _entries().items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name
        wheel = metadata.distribution(name).read_text("WHEEL") or ""
        if "Root-Is-Purelib: false" in wheel:  # compiled: x86_64 and aarch64 at least
            assert len(hashes) >= 2, name


def test_the_wheel_carries_the_lock():
    _, data = shipping.wheel()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.read("finetune/backends/ec2/boot-requirements.txt") == LOCK.read_bytes()
