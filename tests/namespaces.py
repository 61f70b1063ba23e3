"""Emulated hosts on this machine: one mount + UTS namespace per host (``unshare -mu``; root).

Inside a host the hostname is its own, /etc/hosts is a file of the test's (bound over the real
one), and /opt is a tmpfs holding the machine's own /opt entries (bound back) plus the host's
own folders: ``/opt/ml`` and whatever an image or AMI has there (the PyTorch DLAMI's
/opt/pytorch). The machine's real /opt, /etc and / are never written: every mount dies with
the namespace. Used by the SageMaker platform's emulation (tests/backends/sagemaker/
toolkit_host.py) and the EC2 instance's (tests/backends/ec2/instance_host.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# EMU_OPT_BINDS: "NAME=FOLDER" pairs separated by ':' -> /opt/NAME (ml is always EMU_ML).
HOST_SCRIPT = r"""
set -euo pipefail
hostname "$EMU_HOSTNAME"
mount --bind "$EMU_HOSTS_FILE" /etc/hosts
mkdir -p "$EMU_OPT_ORIG" && mount --bind /opt "$EMU_OPT_ORIG"
mount -t tmpfs emulated-opt /opt
declare -A own=([ml]="$EMU_ML")
IFS=: read -ra binds <<< "${EMU_OPT_BINDS:-}"
for pair in "${binds[@]}"; do own[${pair%%=*}]=${pair#*=}; done
for entry in "$EMU_OPT_ORIG"/*; do
  name=${entry##*/}
  [[ -d "$entry" && -z "${own[$name]:-}" ]] || continue
  mkdir "/opt/$name" && mount --bind "$entry" "/opt/$name"
done
for name in "${!own[@]}"; do
  mkdir -p "/opt/$name" && mount --bind "${own[$name]}" "/opt/$name"
done
cd /
exec "$@"
"""


def unshare_missing() -> str | None:
    """Why no emulated host can start here, or None when namespaces work."""
    if shutil.which("unshare") is None:
        return "needs util-linux unshare"
    probe = subprocess.run(["unshare", "-mu", "true"], capture_output=True)
    if probe.returncode != 0:
        return "mount + UTS namespaces need root (unshare -mu)"
    return None


def command(argv: list[str]) -> list[str]:
    """``argv`` run inside a new host (its environment from :func:`environment`)."""
    return ["unshare", "-mu", "bash", "-c", HOST_SCRIPT, "host", *argv]


def environment(
    hostname: str, hosts_file: Path, work: Path, ml: Path, opt: dict[str, Path] | None = None
) -> dict[str, str]:
    """The HOST_SCRIPT's variables: name, /etc/hosts, /opt/ml and other /opt folders."""
    pairs = ":".join(f"{name}={path}" for name, path in (opt or {}).items())
    return dict(
        EMU_HOSTNAME=hostname,
        EMU_HOSTS_FILE=str(hosts_file),
        EMU_OPT_ORIG=str(work / f"{hostname}-opt"),
        EMU_ML=str(ml),
        EMU_OPT_BINDS=pairs,
    )


def write_hosts(path: Path, names: list[tuple[str, str]]) -> Path:
    """An /etc/hosts naming localhost and every (name, address)."""
    lines = ["127.0.0.1 localhost", *(f"{address} {name}" for name, address in names)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry))
    return out
