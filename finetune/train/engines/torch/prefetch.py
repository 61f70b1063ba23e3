"""The next batch prepared while the current one trains: on a GPU, a batch's input work (index
and box copies, the crop gather, normalising, the host-to-device copy of a streamed batch) is
enqueued on a side CUDA stream one batch ahead, and the compute stream waits for it only when
it takes the batch (``wait_stream``) -- NVIDIA's DeepLearningExamples ``PrefetchedWrapper`` and
timm's ``PrefetchLoader`` do the same. Without CUDA the batches pass through unchanged: a CPU
runs one stream in order, so there is nothing to overlap.

What a batch holds does not change (the same draws, in the same order); only when its work
runs on the device does.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

_END = object()


def ahead(batches: Iterator[tuple], device: torch.device) -> Iterator[tuple]:
    """``batches`` with each one's device work started before the previous one is used."""
    if device.type != "cuda":
        yield from batches
        return
    side = torch.cuda.Stream(device)
    compute = torch.cuda.current_stream(device)

    def prepare():
        side.wait_stream(compute)  # (inputs the compute stream wrote stay ordered)
        with torch.cuda.stream(side):
            return next(batches, _END)

    upcoming = prepare()
    while upcoming is not _END:
        compute.wait_stream(side)
        for tensor in upcoming:
            tensor.record_stream(compute)  # (its memory is not reused while compute reads it)
        ready = upcoming
        upcoming = prepare()  # enqueued before this batch's step: the two overlap
        yield ready
