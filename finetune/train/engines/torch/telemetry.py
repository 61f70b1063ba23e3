"""The torch engine's feed of finetune.train.telemetry: the GPUs' name and NVML sampler, and
the input clock, which times how long each step waits for its batch.

On a GPU the clock records CUDA events around the fetch and reads them at the next sync (the
device's wait for the batch; a host clock would time kernel queueing instead); on a CPU it
reads the host clock.
"""

from __future__ import annotations

import contextlib
import time

import torch

from finetune.catalog import gpu_peaks
from finetune.train.engines.torch import ddp, hardware
from finetune.train.telemetry import GpuSampler, Telemetry


def open_telemetry(
    device: torch.device, group: ddp.Group, precision: str, flops_per_image: float
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
    """Input wait of the steps, added to ``telemetry``: ``with clock.waiting(): fetch``."""

    def __init__(self, device: torch.device, telemetry: Telemetry) -> None:
        self.cuda = device.type == "cuda"
        self.telemetry = telemetry
        self._marks: list = []  # (started, ready) CUDA events not yet read

    @contextlib.contextmanager
    def waiting(self):
        if self.cuda:
            started = torch.cuda.Event(enable_timing=True)
            started.record()
            yield
            ready = torch.cuda.Event(enable_timing=True)
            ready.record()
            self._marks.append((started, ready))  # read at the next sync
        else:
            started = time.perf_counter()
            yield
            self.telemetry.add_wait(time.perf_counter() - started)

    def count(self) -> None:
        """Add the recorded waits (call after the device has caught up, e.g. a sync)."""
        if self._marks:
            self._marks[-1][1].synchronize()
            for started, ready in self._marks:
                self.telemetry.add_wait(started.elapsed_time(ready) / 1000)
            self._marks.clear()
