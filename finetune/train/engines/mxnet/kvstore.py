"""MXNet's gradient exchange (its kvstore), chosen when a run is planned. Pure: no MXNet
import, so `launch` can ask before anything is installed or started."""

from __future__ import annotations

from finetune.errors import ConfigError

# local: sums on the CPU; device: on the GPUs; nccl: NCCL between GPUs of one host;
# dist_sync / dist_device_sync: several hosts through the parameter server (cluster.py)
KVSTORES = ("device", "nccl", "local", "dist_sync", "dist_device_sync")


def choose(requested: str | None, hosts: int, device: str, devices_per_host: int) -> str:
    """The kvstore for ``hosts`` hosts of ``devices_per_host`` devices of kind ``device``
    (gpu, cpu or auto): ``requested`` when given (ConfigError when it cannot span the
    hosts), else distributed across hosts and on-device within one host of several GPUs."""
    if requested is None:
        if hosts > 1:
            return "dist_device_sync" if device == "gpu" else "dist_sync"
        return "device" if device == "gpu" and devices_per_host > 1 else "local"
    if hosts > 1 and not requested.startswith("dist"):
        raise ConfigError(
            f"train.kvstore={requested} cannot synchronise {hosts} hosts",
            "use train.kvstore=dist_sync or dist_device_sync, or leave it unset.",
        )
    return requested
