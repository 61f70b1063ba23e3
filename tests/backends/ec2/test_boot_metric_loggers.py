"""Issue 24 on EC2: a torch run whose recipe names metric loggers installs their packages on the
PyTorch DLAMI (the hashed list inside the checked wheel, after the base install), and a run
without loggers does not; a failed install is one log line and the agent starts all the same.

The user data runs in bash in an emulated host (tests/namespaces.py: /opt is the host's own);
the edges are stubs: the power commands, `aws s3 cp` (a copy of our wheel from this machine)
and the DLAMI's python, whose `-m pip` and `-m finetune.backends.ec2.agent` only record their
command line (pip may be told to fail, as it does without a route to PyPI) while `python -c`
runs for real. The whole boot, real pip and trainer included, is test_ec2_boot_emulation.py.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from finetune.backends import shipping
from finetune.backends.ec2.request import render_user_data
from tests import namespaces

from .instance_host import POWER_STUBS, STUB, SYSTEM_PATH
from .test_ec2_torch_userdata import spec

_WHY_NOT = namespaces.unshare_missing()
ROOT = Path(__file__).resolve().parents[3]
AWS_STUB = '#!/bin/bash\ncp "$EMU_WHEEL" "${@: -1}"\n'  # aws s3 cp ... URI DEST
PYTHON_STUB = """#!/bin/bash
printf '%s\\n' "$*" >> "$EMU_LOG/python.log"
case "$1 $2" in
  "-m pip")
    cp "${@: -1}" "$EMU_LOG/"  # the list pip was given
    [[ "$*" != *metrics.txt* || -z "${EMU_PIP_FAILS:-}" ]]; exit ;;
  "-m finetune.backends.ec2.agent") exit 0 ;;
esac
exec "$EMU_REAL_PYTHON" "$@"
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    name, data = shipping.wheel()
    path = tmp_path_factory.mktemp("wheel") / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def _boot(root: Path, user_data: str, wheel: Path, pip_fails: bool) -> tuple[int, str]:
    """Run ``user_data`` in a host of its own; its exit code and output."""
    for sub in ("ml", "stubs", "log"):
        (root / sub).mkdir(parents=True)
    stubs = {**dict.fromkeys(POWER_STUBS, STUB), "aws": AWS_STUB, "python": PYTHON_STUB}
    for name, text in stubs.items():
        (root / "stubs" / name).write_text(text)
        (root / "stubs" / name).chmod(0o755)
    (root / "user-data.sh").write_text(user_data)
    hosts = namespaces.write_hosts(root / "hosts", [("ip-127-0-0-2", "127.0.0.2")])
    env = {
        "PATH": f"{root / 'stubs'}:{SYSTEM_PATH}",
        "LANG": "C.UTF-8",
        "EMU_WHEEL": str(wheel),
        "EMU_LOG": str(root / "log"),
        "EMU_REAL_PYTHON": sys.executable,
        "EMU_POWER_LOG": str(root / "log" / "power.log"),
        "EMU_PIP_FAILS": "1" if pip_fails else "",
        **namespaces.environment("ip-127-0-0-2", hosts, root, root / "ml"),
    }
    argv = namespaces.command(["bash", str(root / "user-data.sh")])
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or "")
@pytest.mark.parametrize("case", ["no loggers", "installed", "install fails"])
def test_the_boot_installs_the_loggers_only_when_named_and_goes_on_without_them(
    case, wheel, tmp_path
):
    path, digest = wheel
    lock = shipping.METRICS_LOCK if case != "no loggers" else ""
    python = str(tmp_path / "stubs" / "python")
    launch = replace(spec(), wheel_sha256=digest, python=python, metrics_lock=lock)
    code, output = _boot(tmp_path, render_user_data(launch), path, case == "install fails")
    assert code == 0, output
    calls = (tmp_path / "log" / "python.log").read_text().splitlines()
    pips = [c for c in calls if c.startswith("-m pip install")]
    flags = "--quiet --no-input --no-deps --require-hashes --constraint /opt/finetune/keep.txt"
    assert pips[0] == f"-m pip install {flags} --requirement /opt/finetune/requirements.txt"
    assert calls[-1] == "-m finetune.backends.ec2.agent"  # the run starts in every case
    power = (tmp_path / "log" / "power.log").read_text().splitlines()
    assert power[0].startswith("systemd-run --on-active=") and power[-1] == "systemctl poweroff"
    warning = "the run continues without metric loggers"
    if case == "no loggers":
        assert len(pips) == 1 and not (tmp_path / "log" / "metrics.txt").exists()
        assert "metric loggers" not in output
        return
    # after the base install, the same way, the list from the checked wheel: the lock itself
    assert pips[1] == f"-m pip install {flags} --requirement /opt/finetune/metrics.txt"
    assert calls.index(pips[1]) < len(calls) - 1
    sent = (tmp_path / "log" / "metrics.txt").read_bytes()
    assert sent == (ROOT / shipping.METRICS_LOCK).read_bytes() and b"tensorboardx==" in sent
    assert (warning in output) == (case == "install fails"), output
