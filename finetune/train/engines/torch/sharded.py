"""Validation shared by the run's processes: DistributedSampler's shards, every record counted
exactly once.

Each process evaluates records ``rank, rank + world, ...`` of the split, padded (by repeating
the first records, as DistributedSampler does) so that all have as many batches; every
batch's scores, labels and a real/padding flag are gathered on rank 0, where record i of
every rank, in rank order, is file order: the padding is dropped and the rest fed to the
Evaluator, which checks the labels against the file's. The processes also add up how many
real records they evaluated, which must be the split's count.
"""

from __future__ import annotations

import torch

from finetune.contracts.engine import StopFlag
from finetune.data.recordio import read_index
from finetune.errors import DataError
from finetune.train.engines.torch import ddp
from finetune.train.evaluation import Evaluator


def evaluate(session, split: str, evaluator: Evaluator | None, stop: StopFlag) -> bool:
    """DistributedSampler's shards (padded by repeating records), every batch gathered
    on rank 0 in file order with the padding dropped: each record counted once."""
    g = session.group
    count = _split_count(session.files, split)
    records, real = ddp.shard(count, g.rank, g.world)
    done = 0
    for x, y in session.data.eval_batches(split, records):
        halt, _ = g.agree(stop, False)  # a stop reaches every process within one batch
        if halt:
            return False
        n = len(y)
        flags = torch.tensor(real[done : done + n], dtype=torch.float32)[:, None]
        labels = y.cpu().to(torch.float32)[:, None]
        rows = torch.cat([session.eval_forward(x).float().cpu(), labels, flags], 1)
        gathered = g.gather(rows)
        done += n
        if gathered is not None:  # rank 0: (record i of every rank, ...) is file order
            if evaluator is None:
                raise ValueError(f"rank 0 gathered {split} without an evaluator to take it")
            block = torch.stack(gathered, 1).reshape(n * g.world, -1)
            block = block[block[:, -1] > 0]
            evaluator.add(block[:, :-2].numpy(), block[:, -2].to(torch.int64).numpy())
    (counted,) = g.sum([float(sum(real))])
    if int(counted) != count:
        raise DataError(
            f"the processes evaluated {int(counted)} records of {split}, not {count}",
            "report this: the shards must cover the split exactly once.",
        )
    return True


def _split_count(files, split: str) -> int:
    f = files
    idx = f.val_idx if split == "val" else f.test_idx
    rec = f.val_rec if split == "val" else f.test_rec
    return len(list(read_index(idx, rec.stat().st_size)))
