"""The MXNet engine's launcher: multi-host training through MXNet's own parameter server
(ps-lite). With a dist kvstore every host starts a server (and the first a scheduler) as child
processes before MXNet is imported, then trains as the worker (docs/trainer.md: MXNet's
parameter server)."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from finetune.contracts.container import TrainJob
from finetune.engines.mxnet import MxnetOptions
from finetune.errors import ConfigError
from finetune.train.hosts import first_host_address

PORT_ENV = "FINETUNE_PS_PORT"
DEFAULT_PORT = 9000
DIST_KVSTORES = ("dist_sync", "dist_device_sync")
STOP_GRACE_S = 5.0  # a child gets this long after SIGTERM before SIGKILL
FINISH_WAIT_S = 10.0  # after training, how long the children may take to end by themselves

log = logging.getLogger(__name__)
_abandoned = False  # a cluster was left because training failed


@dataclass(frozen=True)
class Cluster:
    """This host's place in the parameter-server cluster."""

    hosts: tuple[str, ...]  # sorted
    current_host: str
    root_uri: str  # the scheduler's address
    port: int
    interface: str | None = None

    @property
    def size(self) -> int:
        return len(self.hosts)

    @property
    def is_first(self) -> bool:
        return self.current_host == self.hosts[0]

    @property
    def child_roles(self) -> tuple[str, ...]:
        """The roles this host starts beside its worker."""
        return ("scheduler", "server") if self.is_first else ("server",)

    def env(self, role: str) -> dict[str, str]:
        """The DMLC_* variables of ``role`` (scheduler, server or worker) on this host."""
        env = {
            "DMLC_ROLE": role,
            "DMLC_PS_ROOT_URI": self.root_uri,
            "DMLC_PS_ROOT_PORT": str(self.port),
            "DMLC_NUM_SERVER": str(self.size),
            "DMLC_NUM_WORKER": str(self.size),
        }
        if self.interface:
            env["DMLC_INTERFACE"] = self.interface
        return env


def plan(
    hosts: tuple[str, ...] | list[str],
    current_host: str,
    kvstore: str,
    interface: str | None = None,
    environ: Mapping[str, str] | None = None,
    resolve: Callable[[str], str] = socket.gethostbyname,
) -> Cluster | None:
    """The cluster this host belongs to, or None when training stays on this host."""
    environ = os.environ if environ is None else environ
    if len(hosts) < 2 or kvstore not in DIST_KVSTORES:
        return None
    raw_port = environ.get(PORT_ENV) or str(DEFAULT_PORT)
    if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
        raise ConfigError(f"{PORT_ENV}={raw_port!r} is not a port", f"set {PORT_ENV} to 1-65535.")
    ordered = tuple(sorted(hosts))
    address = first_host_address(ordered, environ, resolve, "the parameter-server scheduler")
    return Cluster(ordered, current_host, address, int(raw_port), interface or None)


def plan_for(job: TrainJob) -> Cluster | None:
    """:func:`plan` for a loaded job (the interface from resourceconfig.json); None for the
    torch engine (torchrun: finetune.train.engines.torch.launch)."""
    if job.hparams.engine != "mxnet":
        return None
    return plan(job.hosts, job.current_host, MxnetOptions.of(job.hparams).kvstore, _interface(job))


def _interface(job: TrainJob) -> str | None:
    path = job.layout.config_dir / "resourceconfig.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("network_interface_name")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None


@contextlib.contextmanager
def roles(job: TrainJob) -> Iterator[Cluster | None]:
    """Around the worker's training: start this host's scheduler/server children, put the
    worker's DMLC_* variables into os.environ (before mxnet is imported) and, on the way out,
    stop the children. Does nothing for a single-host job."""
    cluster = plan_for(job)
    if cluster is None:
        yield None
        return
    log.info(
        "parameter-server cluster: %d host(s), scheduler %s:%d, this host %s runs %s + worker",
        cluster.size,
        cluster.root_uri,
        cluster.port,
        cluster.current_host,
        " + ".join(cluster.child_roles),
    )
    children: list[subprocess.Popen] = []
    saved = {k: os.environ.get(k) for k in cluster.env("worker")}
    try:
        for role in cluster.child_roles:
            children.append(start_role(cluster, role))
        os.environ.update(cluster.env("worker"))
        yield cluster
        # done: freeing the worker's kvstore (still alive in reference cycles) says goodbye to
        # the cluster, after which the scheduler and servers end by themselves. A trainer
        # process froze what its start-up made, the kvstore included (finetune.train.startup):
        # frozen objects are out of gc.collect's reach until unfrozen
        gc.unfreeze()
        gc.collect()
        stop_children(children, wait_first=FINISH_WAIT_S)
    except BaseException:
        global _abandoned
        _abandoned = True  # see exit_if_abandoned
        raise
    finally:
        stop_children(children)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def exit_if_abandoned(code: int) -> None:
    """After a failure that left a cluster behind, end this process at once with ``code``:
    at interpreter exit MXNet's kvstore would wait in a barrier for the other workers, which
    never comes. Call it after the failure reason is written."""
    if _abandoned:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        logging.shutdown()
        os._exit(code)


# a scheduler or server serves inside MXNet's import (DMLC_ROLE set): MXNet without what it
# only tries, as zoo.mxnet imports it, and without finetune (docs/decisions/004-mxnet-import.md)
ROLE_CODE = "import sys; sys.modules['sklearn'] = sys.modules['scipy.stats'] = None; import mxnet"


def start_role(cluster: Cluster, role: str) -> subprocess.Popen:
    """A scheduler or server: a Python process that imports mxnet with DMLC_ROLE set."""
    env = dict(os.environ, **cluster.env(role))
    return subprocess.Popen(
        [sys.executable, "-c", ROLE_CODE],
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
    )


def stop_children(
    children: list[subprocess.Popen], grace: float = STOP_GRACE_S, wait_first: float = 0.0
) -> None:
    """Give the children ``wait_first`` seconds to end by themselves, then SIGTERM, then
    (``grace`` seconds later) SIGKILL the ones still running."""
    deadline = time.monotonic() + wait_first
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(deadline - time.monotonic(), 0.0))
    for child in children:
        if child.poll() is None:
            log.info("stopping parameter-server process %d", child.pid)
            child.terminate()
    for child in children:
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the worker dies (Linux; elsewhere nothing)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
