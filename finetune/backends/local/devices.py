"""The local backend's devices: the GPUs this machine has, and the resources a launch asks for."""

from __future__ import annotations

import shutil
import subprocess

from finetune.errors import UsageError
from finetune.plan import Resources


def local_gpus() -> list[int]:
    """Indices of the NVIDIA GPUs on this machine (none when nvidia-smi is absent)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [i for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def parse_gpus(text: str) -> tuple[int, ...]:
    """'0,1' -> (0, 1); anything else is a UsageError."""
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(
            f"--gpus {text!r} is not a list of GPU numbers", "pass e.g. --gpus 0,1."
        ) from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise UsageError(
            f"--gpus {text!r} is not a list of distinct GPU numbers", "pass e.g. --gpus 0,1."
        )
    return ids


def local_resources(gpus: str | None, cpus: int | None):
    """Resources for the local backend and the GPU ids to expose (CUDA_VISIBLE_DEVICES).
    GPUs asked for must be here: a plan for devices this machine lacks would fail later."""
    if gpus and cpus:
        raise UsageError("--gpus and --cpus exclude each other", "pass one of them.")
    found = tuple(local_gpus())
    if gpus:
        ids = parse_gpus(gpus)
        absent = [i for i in ids if i not in found]
        if absent:
            have = f"GPUs {', '.join(map(str, found))}" if found else "no NVIDIA GPU"
            raise UsageError(
                f"--gpus {gpus}: GPU {', '.join(map(str, absent))} is not on this machine "
                f"(nvidia-smi -L shows {have})",
                "pass GPU numbers that `nvidia-smi -L` lists, --cpus N to train on the CPU, "
                "or launch on a cloud backend.",
            )
        return Resources(backend="local", devices_per_host=len(ids), device="gpu"), ids
    if cpus:
        return Resources(backend="local", devices_per_host=cpus, device="cpu"), ()
    if found:
        return Resources(backend="local", devices_per_host=len(found), device="gpu"), found
    return Resources(backend="local", devices_per_host=1, device="cpu"), ()
