"""Loss and hits of the training batches, read back from the devices one batch late.

The Python loop queues batch i+1 before it waits for batch i, so the devices do not idle
while the host prepares the next batch, and the loop never runs more than one batch ahead
(SIGTERM is seen promptly).
"""

from __future__ import annotations

from collections import deque

from finetune.train.engines.mxnet.zoo import mxnet

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)


class Tally:
    """Sums each batch's loss and hit count, one batch late."""

    def __init__(self) -> None:
        self._pending: deque = deque()
        self.loss_sum = 0.0
        self.hits = 0
        self.seen = 0

    def add(self, losses: list, outputs: list, labels: list) -> None:
        """Queue one batch (lists of per-device NDArrays); read back the one before."""
        loss_sums = [loss.sum() for loss in losses]
        hits = [(out.argmax(axis=1) == lab).sum() for out, lab in zip(outputs, labels, strict=True)]
        seen = sum(lab.shape[0] for lab in labels)
        self._pending.append((loss_sums, hits, seen))
        while len(self._pending) > 1:
            self._read_oldest()

    def sync(self) -> tuple[float, int, int]:
        """Read everything back, wait for all queued work (backward, update) to finish and
        return (loss sum, hits, images) since the last sync."""
        while self._pending:
            self._read_oldest()
        mx.nd.waitall()
        out = (self.loss_sum, self.hits, self.seen)
        self.loss_sum, self.hits, self.seen = 0.0, 0, 0
        return out

    def _read_oldest(self) -> None:
        loss_sums, hits, seen = self._pending.popleft()
        self.loss_sum += sum(x.asscalar() for x in loss_sums)
        self.hits += int(sum(x.asscalar() for x in hits))
        self.seen += seen
