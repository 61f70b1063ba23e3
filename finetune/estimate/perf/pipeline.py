"""The data pipeline's cap: how many images/s an instance's CPUs decode, per epoch.

Rate = per-core decode rate (pipeline.csv: measured for the torch engine's streaming path by
benchmarks/decode_rate.py; the MXNet study's 1,500 img/s on 3 threads for ImageRecordIter)
x the vCPUs left after one per training process (each GPU's process needs a core to launch
its kernels). When this is below what the GPUs could take, the run is data-bound: the GPUs
wait for the CPU, the lesson of the batch-size study this project follows.

Which path decodes every epoch: MXNet's ImageRecordIter always; the torch engine only when
its decoded images do not fit in half the GPU's memory (train/engines/torch/session.py,
RESIDENT_SHARE); otherwise it decodes once, on the GPU, and no CPU cap applies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from finetune.catalog._files import read_rows
from finetune.engines.descriptor import Engine
from finetune.estimate.perf._data import perf_text

FILE = "pipeline.csv"
HEADER = ("Pipeline", "ImagesPerSecPerCore", "Source", "Notes")
RESIDENT_SHARE = 0.5  # as the torch engine decides (session.RESIDENT_SHARE)
CROP_FRACTION = 0.875  # image_size / stored shorter side (train/preprocess.CROP_FRACTION)


@dataclass(frozen=True)
class Decoder:
    name: str
    per_core: float
    source: str


@functools.cache
def decoders() -> dict[str, Decoder]:
    rows = read_rows(perf_text(FILE), HEADER, FILE)
    return {
        r["Pipeline"]: Decoder(r["Pipeline"], float(r["ImagesPerSecPerCore"]), r["Source"])
        for r in rows
    }


def per_epoch_decoder(
    engine: Engine, images: int, image_size: int, gpu_memory_gib: float
) -> Decoder | None:
    """The Decoder that runs every epoch for this engine and dataset, None when images are
    decoded once and kept on the GPU (the torch engine's resident path)."""
    if not engine.resident:
        return decoders()[engine.decoder]
    side = round(image_size / CROP_FRACTION)
    decoded = images * side * side * 4 / 3 * 3  # as hardware.decoded_bytes: 4:3, RGB uint8
    if decoded <= RESIDENT_SHARE * gpu_memory_gib * 2**30:
        return None
    return decoders()[engine.decoder]


def cap(decoder: Decoder, vcpus: int, gpus_per_host: int) -> float:
    """Images/s one host's CPUs decode: per-core rate x (vCPUs - one per GPU process)."""
    return decoder.per_core * max(1, vcpus - gpus_per_host)
