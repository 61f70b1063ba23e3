"""The torch engine's feed of finetune.train.telemetry: the GPUs' name and NVML sampler, and
the input clock, which times each step's fetch of its batch in two kinds.

Host wait: the host clock around the fetch from a loader (worker processes): the GPU starves
while the host blocks there. Input work in series with compute: on a GPU, CUDA events around
the fetch read at the next sync (the device's time between the two points: crops, copies, and
any stall they caused); on a CPU with no loader (the resident path crops in this thread), the
host clock around the fetch, which is that work itself.
"""

from __future__ import annotations

import contextlib
import time

import torch

from finetune.catalog import gpu_peaks
from finetune.train.engines.torch import ddp, hardware
from finetune.train.telemetry import GpuSampler, Telemetry


def open_telemetry(
    device: torch.device, group: ddp.Group, precision: str, flops_per_image: float | None
) -> Telemetry:
    """This process's Telemetry; rank 0 samples its host's GPUs (one NVML thread)."""
    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else None
    sampler = None
    if cuda and group.rank == 0:
        sampler = GpuSampler.open(hardware.nvml_ids(group.local_world))
    return Telemetry(
        precision=precision,
        gpus=group.world if cuda else 0,
        peak=gpu_peaks.lookup(name),
        flops_per_image=flops_per_image,
        sampler=sampler,
        reduce_max=group.max if group.world > 1 else None,
    )


class InputClock:
    """Input time of the steps, added to ``telemetry``: ``with clock.waiting(): fetch``.
    ``loader``: the fetch blocks on loader workers (else it computes the batch itself)."""

    def __init__(self, device: torch.device, telemetry: Telemetry, loader: bool = True) -> None:
        self.cuda = device.type == "cuda"
        self.telemetry, self.loader = telemetry, loader
        self._marks: list = []  # (started, ready) CUDA events not yet read

    @contextlib.contextmanager
    def waiting(self):
        started = None
        if self.cuda:
            started = torch.cuda.Event(enable_timing=True)
            started.record()
        host = time.perf_counter()
        yield
        host = time.perf_counter() - host
        if self.cuda:
            ready = torch.cuda.Event(enable_timing=True)
            ready.record()
            self._marks.append((started, ready))  # read at the next sync
        if self.cuda or self.loader:
            self.telemetry.add_wait(host)
        else:  # a CPU computing the batch in this thread: work in series, nobody starved
            self.telemetry.add_device_input(host)

    def count(self) -> None:
        """Add the recorded waits (call after the device has caught up, e.g. a sync)."""
        if self._marks:
            self._marks[-1][1].synchronize()
            for started, ready in self._marks:
                self.telemetry.add_device_input(started.elapsed_time(ready) / 1000)
            self._marks.clear()
