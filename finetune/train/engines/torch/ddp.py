"""This process's place among the run's training processes, and the few collectives the
epoch loop needs beside DistributedDataParallel's own gradient all-reduce.

torchrun (finetune.train.engines.torch.launch, or a launcher such as SageMaker's training
toolkit) starts one process per device with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
and MASTER_ADDR/PORT set; :func:`join` joins the process group (NCCL on GPUs, gloo on CPUs).
Control traffic -- the per-step stop/save agreement, the tallies, the validation scores --
goes over gloo on CPU tensors even beside NCCL: it never waits for the GPU's queue, and a
peer that died breaks its TCP connection at once, so the survivors fail instead of hanging.
Without those variables the process trains alone and every collective is the identity.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import signal
from dataclasses import dataclass

import torch
import torch.distributed as dist

from finetune.contracts.engine import StopFlag
from finetune.errors import ConfigError
from finetune.train.engines.torch.launch import PARENT_ENV

TIMEOUT_ENV = "FINETUNE_DDP_TIMEOUT_S"  # a collective waiting longer than this fails
DEFAULT_TIMEOUT_S = 600.0

log = logging.getLogger(__name__)


@dataclass
class Group:
    """Rank and sizes of this process (all 0/1 when it trains alone): the epoch loop's
    finetune.train.engine_api.ProcessGroup."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1
    # the gloo group for control collectives (None: the default one)
    control: dist.ProcessGroup | None = None

    @property
    def hosts(self) -> int:
        """Machines in the group (torchrun's "nodes"), each with local_world processes."""
        return max(self.world // self.local_world, 1)

    def agree(self, stop: StopFlag, save_due: bool) -> tuple[bool, bool]:
        """After every step: (stop, checkpoint now), one answer for every process (the
        finetune.train.engine_api.ProcessGroup's). One small all-reduce of the highest signal
        number any process got and whether any wants a checkpoint: a stop any process got
        reaches all of them (all end after this same step); the caller must act on the
        returned stop, not on its own flag, which a signal may set just after this."""
        mine = signal.Signals[stop.signal_name].value if stop and stop.signal_name else 0
        if self.world == 1:
            return bool(mine), save_due
        t = torch.tensor([mine, int(save_due)], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control)
        signum, save = int(t[0]), bool(t[1])
        if signum:
            stop.request(signal_name(signum))
        return bool(signum), save

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums over the processes (float64)."""
        if self.world == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.control)
        return t.tolist()

    def max(self, value: float) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control)
        return float(t[0])

    def gather(self, tensor: torch.Tensor) -> list[torch.Tensor] | None:
        """``tensor`` (CPU, the same shape on every process) from every process, on rank 0."""
        if self.world == 1:
            return [tensor]
        out = [torch.empty_like(tensor) for _ in range(self.world)] if self.rank == 0 else None
        dist.gather(tensor, out, dst=0, group=self.control)
        return out

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def join(device_type: str) -> Group:
    """The process group of this run (joined), or a one-process Group without torchrun."""
    env = os.environ
    if "RANK" not in env or "WORLD_SIZE" not in env or int(env["WORLD_SIZE"]) <= 1:
        return Group()
    _die_with_launcher()
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local_rank = int(env.get("LOCAL_RANK", "0"))
    local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    timeout = datetime.timedelta(seconds=_timeout())
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, timeout=timeout)
    # NCCL (GPUs) carries the gradients; control messages go over gloo on CPU tensors
    cuda = device_type == "cuda"
    control = dist.new_group(backend="gloo", timeout=timeout) if cuda else None
    if control is not None and not isinstance(control, dist.ProcessGroup):  # every rank joins
        raise RuntimeError(f"process {rank} is not a member of the run's control group")
    log.info("process %d of %d (local %d of %d), %s", rank, world, local_rank, local_world,
             backend)  # fmt: skip
    return Group(rank, world, local_rank, local_world, control)


def local_batch(global_batch: int, world: int) -> int:
    """Each process's share of a global batch; ConfigError when it does not divide."""
    if global_batch % world:
        raise ConfigError(
            f"the global batch {global_batch} does not divide among the {world} training processes",
            f"make it a multiple of {world}: batch_per_device x devices x hosts (what "
            "`finetune launch` derives).",
        )
    return global_batch // world


def shard(count: int, rank: int, world: int) -> tuple[list[int], list[bool]]:
    """Rank ``rank``'s records of a split of ``count`` (DistributedSampler's order, unshuffled:
    record ``rank + world*i``), padded by repeating the first records so every process has
    as many; the flags say which are real (the padding is never counted)."""
    per_rank = -(-count // world)
    padded = [i % count for i in range(per_rank * world)]
    return padded[rank::world], [p < count for p in range(per_rank * world)][rank::world]


def signal_name(number: int) -> str:
    return signal.Signals(number).name


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV) or str(DEFAULT_TIMEOUT_S)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ConfigError(f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds",
                          f"set {TIMEOUT_ENV} to e.g. 600, or unset it.")  # fmt: skip
    return value


def _die_with_launcher() -> None:
    """Under our launcher: SIGKILL when it dies (it would otherwise leave us orphaned; its
    workers live in sessions of their own, out of reach of a signal to its group)."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if str(os.getppid()) != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)
