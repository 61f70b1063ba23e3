"""Turn launch options into plan Resources: local devices, or an instance from the catalog."""

from __future__ import annotations

import shutil
import subprocess

from finetune.errors import UsageError


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
    """Resources for the local backend and the GPU ids to expose (CUDA_VISIBLE_DEVICES)."""
    from finetune.plan import Resources

    if gpus and cpus:
        raise UsageError("--gpus and --cpus exclude each other", "pass one of them.")
    if gpus:
        ids = parse_gpus(gpus)
        return Resources(backend="local", devices_per_host=len(ids), device="gpu"), ids
    if cpus:
        return Resources(backend="local", devices_per_host=cpus, device="cpu"), ()
    found = tuple(local_gpus())
    if found:
        return Resources(backend="local", devices_per_host=len(found), device="gpu"), found
    return Resources(backend="local", devices_per_host=1, device="cpu"), ()
