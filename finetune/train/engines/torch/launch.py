"""Several training processes from the one entrypoint, through torchrun's own launcher
(torch.distributed's elastic agent, in a thread so this process keeps its signal handling):
one process per device and host, one DistributedDataParallel group; a stop is forwarded, a
dead worker stops the others (docs/trainer.md: several processes through torchrun)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from finetune.contracts.container import EXIT_STOPPED, TrainJob, read_stopped
from finetune.contracts.engine import StopFlag
from finetune.errors import ConfigError, FinetuneError
from finetune.train import hosts as host_addresses
from finetune.train import startup

PORT_ENV = "FINETUNE_TORCHRUN_PORT"
PARENT_ENV = "FINETUNE_TORCHRUN_PARENT"  # set here: the pid the workers die with
DEFAULT_PORT = 29500  # torchrun's
SHUTDOWN_S = 15  # after a worker failed, the others' time to end before SIGKILL
RENDEZVOUS_S = 600  # how long the hosts may take to find each other
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launch:
    """This host's share of a multi-process run."""

    nnodes: int
    node_rank: int
    nproc: int
    master_addr: str
    master_port: int

    @property
    def world(self) -> int:
        return self.nnodes * self.nproc


class ProcessFailed(FinetuneError):
    """A training process failed: the run's exit code is that process's."""

    def __init__(self, what: str, fix: str | None, exit_code: int) -> None:
        super().__init__(what, fix)
        self.exit_code = exit_code


def under_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return all(k in environ for k in TORCHRUN_ENV)


def plan(
    job: TrainJob,
    environ: Mapping[str, str] | None = None,
    gpus: int | None = None,
    resolve: Callable[[str], str] = socket.gethostbyname,
) -> Launch | None:
    """The processes to start on this host, or None when this process trains (alone, or as
    a worker torchrun started). ``gpus``: CUDA devices here (None: ask torch)."""
    environ = os.environ if environ is None else environ
    if under_torchrun(environ):
        return None
    nproc = local_processes(job.hparams, gpus)
    hosts = sorted(job.hosts)
    if nproc * len(hosts) == 1:
        return None
    if len(hosts) == 1:
        address, port = "127.0.0.1", _port(environ, default=_free_port())
    else:
        address = host_addresses.first_host_address(hosts, environ, resolve, "the torchrun master")
        port = _port(environ, default=DEFAULT_PORT)
    return Launch(len(hosts), hosts.index(job.current_host), nproc, address, port)


def local_processes(hp, gpus: int | None = None) -> int:
    """One process per CUDA GPU; on a CPU (asked, or no GPU) ``devices_per_host``."""
    if hp.device == "cpu":
        return hp.devices_per_host
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
    if gpus:
        return gpus
    return 1 if hp.device == "gpu" else hp.devices_per_host  # (gpu: the worker says why not)


def _port(environ: Mapping[str, str], default: int) -> int:
    raw = environ.get(PORT_ENV)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"{PORT_ENV}={raw!r} is not a port", f"set {PORT_ENV} to 1-65535.")
    return int(raw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(job: TrainJob, launch: Launch, stop: StopFlag) -> str | None:
    """Start this host's workers and wait for them; returns the stop signal's name when they
    stopped on request, raises ProcessFailed when one failed."""
    output = job.layout.root / "output"
    output.mkdir(parents=True, exist_ok=True)
    logs = tempfile.mkdtemp(prefix="torchelastic-", dir=output)
    try:
        return _run(job, launch, stop, logs)
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _run(job: TrainJob, launch: Launch, stop: StopFlag, logs: str) -> str | None:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=launch.nnodes,
        max_nodes=launch.nnodes,
        nproc_per_node=launch.nproc,
        run_id="finetune",
        rdzv_backend="static",
        rdzv_endpoint=f"{launch.master_addr}:{launch.master_port}",
        rdzv_configs={"rank": launch.node_rank, "timeout": RENDEZVOUS_S},
        max_restarts=0,
        monitor_interval=0.1,
        shutdown_timeout=SHUTDOWN_S,
        logs_specs=DefaultLogsSpecs(log_dir=logs),
    )
    log.info(
        "torchrun: host %d of %d, %d process(es) here, %d in all, master %s:%d",
        launch.node_rank, launch.nnodes, launch.nproc, launch.world, launch.master_addr,
        launch.master_port,
    )  # fmt: skip
    os.environ[PARENT_ENV] = str(os.getpid())  # the workers die with this process
    startup.setup_done()  # the launcher is set up: collector on (finetune.train.startup)
    outcome: dict = {}

    def agent() -> None:
        try:
            outcome["done"] = elastic_launch(config, sys.executable)("-u", "-m", "finetune.train")
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=agent, name="torchrun-agent", daemon=True)
    thread.start()
    forwarded = False
    try:
        while thread.is_alive():
            thread.join(0.1)
            if stop and stop.signal_name and not forwarded:  # the workers checkpoint, exit 0
                forwarded = _signal_children(signal.Signals[stop.signal_name])
    finally:
        if thread.is_alive():  # leaving early (a second Ctrl-C): take the workers along
            _signal_children(signal.SIGKILL)
            thread.join(SHUTDOWN_S)
    error = outcome.get("error")
    if error is not None:
        stopped = _stopped_by(error, job)
        if stopped:
            return stopped
        raise _failure(error, job, launch)
    return stop.signal_name if stop else None


def _stopped_by(error: BaseException, job: TrainJob) -> str | None:
    """The signal that stopped the workers, when the agent's "failure" is only rank 0's
    EXIT_STOPPED after its checkpoint (and its marker); None for a real failure."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if not isinstance(error, ChildFailedError) or not error.failures:
        return None
    if any(f.exitcode != EXIT_STOPPED for f in error.failures.values()):
        return None
    marker = read_stopped(job.layout.root)
    return marker.get("signal") if marker else None


def _failure(error: BaseException, job: TrainJob, launch: Launch) -> FinetuneError:
    """The run's failure from the agent's: the process that failed first, by its own reason
    (the failure file the first failing worker wrote) or by the signal that killed it."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if not isinstance(error, ChildFailedError):
        return ProcessFailed(
            f"torchrun could not run the training processes: {type(error).__name__}: {error}",
            "check that every host reaches the first host on the torchrun port "
            f"({launch.master_addr}:{launch.master_port}, {PORT_ENV}), then restart the job.",
            1,
        )

    def order(item):  # a process killed from outside, then one that failed by itself
        rank, f = item
        killed = f.exitcode < 0 and f.signal_name() != "SIGTERM"  # SIGTERM: the agent's
        return (0 if killed else 1 if f.exitcode > 1 else 2, rank)

    rank, f = min(error.failures.items(), key=order)
    reason = _worker_reason(job.layout.failure_file)
    if f.exitcode < 0:
        return ProcessFailed(
            f"training process rank {rank} of {launch.world} (host {job.current_host}, local "
            f"rank {f.local_rank}, pid {f.pid}) was killed by {f.signal_name()}; torchrun "
            "stopped the other processes",
            "find what killed it (the kernel's out-of-memory killer reports in dmesg and the "
            "instance's system log; a smaller batch_per_device needs less memory), then "
            "start the job again: it resumes from the newest checkpoint.",
            128 - f.exitcode,
        )
    what = reason or f"training process rank {rank} of {launch.world} exited with {f.exitcode}"
    fix = None if reason else "read its traceback in the log above."
    return ProcessFailed(what, fix, f.exitcode)


def _worker_reason(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8").strip()
        return text or None
    return None


def _signal_children(sig: signal.Signals) -> bool:
    """``sig`` to every child process of this one (the workers); False if there is none."""
    me, found = os.getpid(), False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                os.kill(int(entry.name), sig)
                found = True
    return found
