"""A real container runtime for the container tier (``pytest -m container``).

scripts/container-runtime.sh sets it up and prints what to export: Debian's podman 4.3 with
runc (containers.conf through CONTAINERS_CONF), a Debian 12 base image built with mmdebstrap
(BASE), the wheels of the training image's lock with the CPU mxnet in place of mxnet-cu112
($FINETUNE_CONTAINERS/image-cpu.lock, hash-checked), and ``podman system service`` answering
the docker CLI at DOCKER_HOST. Without it every container test is skipped, saying so.

The training image is built once per set of inputs from the project's own Dockerfile, the
base and the lock swapped by build arguments (the tag is a digest of the build's inputs, so a
second session, or the other xdist worker, finds it built). ``podman build``, not ``docker
build``: the docker CLI's builder cannot bind the wheel folder into the build, and the build
is not what the product runs (the `docker run` lines are). podman 4.3's ``docker run --rm``
always exits 0 (fixed in 4.6): containers run without --rm and are removed after their exit
code was read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("FINETUNE_CONTAINERS", "/var/tmp/finetune-containers"))
BASE = "localhost/finetune-base:bookworm"
CPU_LOCK = STATE / "image-cpu.lock"
WHEELS = STATE / "wheels"
SETUP = 'eval "$(bash scripts/container-runtime.sh)"'
# what the Dockerfile's build sees (.dockerignore admits exactly these)
BUILD_INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md",
                "requirements/image.lock", "requirements/dev.lock")  # fmt: skip


def runtime_missing() -> str | None:
    """Why no container test can run here, or None when the runtime answers."""
    if not os.environ.get("DOCKER_HOST"):
        return (
            f"no container runtime (DOCKER_HOST unset). To fix: {SETUP}, then pytest -m container"
        )
    for tool in ("docker", "podman"):
        if shutil.which(tool) is None:
            return f"no {tool} on the PATH. To fix: {SETUP}"
    probe = subprocess.run(["docker", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"the docker CLI gets no answer at {os.environ['DOCKER_HOST']}. To fix: {SETUP}"
    if not CPU_LOCK.exists() or not WHEELS.is_dir():
        return f"no image wheels in {STATE}. To fix: {SETUP}"
    return None


def docker(
    *args: str, timeout: float = 120, check: bool = True, **kw
) -> subprocess.CompletedProcess:
    """The docker CLI (DOCKER_HOST: the podman service)."""
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {out.returncode}\n{out.stderr[-3000:]}")
    return out


def inputs_digest() -> str:
    """sha256 of everything the build reads: the context .dockerignore admits, the lock."""
    h = hashlib.sha256()
    files = [REPO / name for name in BUILD_INPUTS]
    files += sorted(p for p in (REPO / "finetune").rglob("*") if p.is_file() and _shipped(p))
    for path in [*files, CPU_LOCK]:
        h.update(str(path.relative_to(REPO) if path.is_relative_to(REPO) else path.name).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _shipped(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


def build_image() -> tuple[str, float]:
    """The training image's tag, built here unless an earlier build of the same inputs is
    there; and the seconds this call spent building (0.0 when it was)."""
    from filelock import FileLock

    tag = f"localhost/finetune-train:{inputs_digest()[:16]}"
    with FileLock(str(STATE / "build.lock"), timeout=1200):
        if subprocess.run(["podman", "image", "exists", tag]).returncode == 0:
            return tag, 0.0
        start = time.monotonic()
        # (the state folder at a fixed path inside the build: build arguments are part of
        # the layer cache's key, so a moved folder would rebuild every layer)
        inside = Path("/finetune-containers")
        cmd = [
            "podman", "build", "--quiet", "--tag", tag,
            "--build-arg", f"BASE={BASE}", "--build-arg", "BASE_DIGEST=",  # a local base
            "--build-arg", f"LOCK={inside / CPU_LOCK.name}",
            "--build-arg", f"PIP_ARGS=--no-index --find-links {inside / WHEELS.name}",
            "--volume", f"{STATE}:{inside}:ro",
            str(REPO),
        ]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if out.returncode != 0:
            raise AssertionError(f"podman build failed:\n{out.stdout[-3000:]}{out.stderr[-5000:]}")
        return tag, time.monotonic() - start


def remove(name: str) -> None:
    """Remove container ``name`` (stopped or not); nothing when there is none."""
    docker("rm", "--force", name, check=False, timeout=60)
