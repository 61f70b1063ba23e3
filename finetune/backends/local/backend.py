"""The local backend: the trainer in a subprocess on this machine (CPU or local GPUs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from pydantic import Field

from finetune.backends import base
from finetune.backends.base import Capabilities, Feature, Hooks, Preflight, Status
from finetune.backends.local.devices import local_resources
from finetune.backends.local.runner import LOCK_FILE, lock_held, take_lock
from finetune.contracts import container, mltree
from finetune.contracts import metrics as mt
from finetune.contracts.container import TENSORBOARD_SUBDIR
from finetune.errors import BusyError, UsageError
from finetune.runs.processes import alive

RUNNER = "finetune.backends.local.runner"


class LocalOptions(base.Options):
    """The local backend's launch flags: which devices of this machine to train on."""

    gpus: str | None = None  # e.g. "0,1"; default: every GPU found, else one CPU context
    cpus: int | None = Field(None, ge=1)


class LocalBackend:
    name = "local"
    capabilities = Capabilities(
        missing={
            Feature.SPOT: "it runs on this machine, which has no spot market",
            Feature.MULTI_NODE: "it runs on one host, this machine",
        },
        offline_status=True,  # status reads the run directory
        on_this_machine=True,
    )
    Options = LocalOptions
    price_book = None  # this machine: nothing billed, nothing to plan
    poll_seconds = 1.0
    stream_logs = False  # the epoch lines say it all; train.log is one `runs logs` away
    max_eur = None  # nothing billed here: no --max-eur

    def __init__(
        self, options: LocalOptions | None = None, hooks: Hooks | None = None, poll_seconds=None
    ) -> None:
        self.options = options or LocalOptions()
        self.poll_seconds = self.poll_seconds if poll_seconds is None else poll_seconds
        self.gpu_ids: tuple[int, ...] = ()  # becomes CUDA_VISIBLE_DEVICES (set by resources)

    def resources(self, request: base.ResourceRequest):
        """This machine's devices: --gpus (present here), --cpus, else all GPUs or one CPU."""
        if request.instance:
            raise UsageError(
                f"--instance {request.instance}: the local backend runs on this machine",
                "drop --instance, or launch on a cloud backend (--backend sagemaker or ec2).",
            )
        resources, self.gpu_ids = local_resources(self.options.gpus, self.options.cpus)
        return resources

    def dataset_summary(self, uri: str):
        raise UsageError(
            f"the local backend trains on a dataset on this machine, not on {uri}",
            "pass --dataset DIR (a folder made by `finetune prepare`), or launch on a cloud "
            "backend (--backend sagemaker or ec2), which reads it from S3.",
        )

    def preflight(self, plan, history=()) -> Preflight:
        """Nothing to check beyond the plan itself; it runs here, at no charge."""
        res = plan.resources
        devices = ",".join(map(str, self.gpu_ids)) if self.gpu_ids else None
        rows = [
            ("where", "this machine" + (f", CUDA_VISIBLE_DEVICES={devices}" if devices else "")),
            ("devices", f"{res.devices_per_host} {res.device}"),
            ("cost", "none charged (your own machine)"),
        ]
        return Preflight(plan, rows, title="Local run")

    def orphans(self, live_runs: set[str], older_than_s: float, scope=None) -> list:
        return []  # nothing outlives a local run but its own folder

    def remove(self, orphans: list) -> list[str]:
        return []

    def submit(self, plan, run, journal=None) -> str:
        """Lay out RUN_DIR/ml, then start the supervisor detached; returns its pid. The run's
        lock is taken here, before anything is touched, and handed to the supervisor: of two
        resumes at once, one starts and the other is refused (BusyError) having changed
        nothing; refused too while a process of the run (a trainer whose supervisor was
        killed) is still alive."""
        run_dir = Path(run.run_dir)
        lock = _take_lock_soon(run_dir)
        if lock is None:
            raise BusyError(
                f"run {run.id} still has a live process (it holds {run_dir / LOCK_FILE}); "
                "a second trainer would write into the same run",
                f"wait for it to end (`finetune runs stop {run.id}` asks it to), then resume.",
            )
        with lock:  # this process's copy; the supervisor keeps the lock through its own
            return str(self._start(plan, run_dir, lock.fileno()).pid)

    def _start(self, plan, run_dir: Path, lock_fd: int) -> subprocess.Popen:
        mltree.layout(run_dir / "ml", plan)
        (run_dir / "plan.json").write_text(plan.to_json())
        for stale in ("exit.json", "runner.json"):  # a resumed run starts a new attempt
            (run_dir / stale).unlink(missing_ok=True)
        # and its trainer's end: a new one killed before it clears them must not inherit them
        container.stopped_file(run_dir / "ml").unlink(missing_ok=True)
        (run_dir / "ml" / "output" / "failure").unlink(missing_ok=True)
        env = dict(os.environ)
        if plan.resources.device == "gpu" and self.gpu_ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpu_ids)
        with open(run_dir / "runner.log", "ab") as runner_log:  # the child keeps its own copy
            return subprocess.Popen(
                [sys.executable, "-m", RUNNER, str(run_dir), str(lock_fd)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=runner_log,
                pass_fds=(lock_fd,),
                start_new_session=True,  # survives the terminal: `launch --detach`
            )

    def status(self, run) -> Status:
        run_dir = Path(run.run_dir)
        exit_file = run_dir / "exit.json"
        if exit_file.exists():
            _reap(int(run.backend_ref or 0))  # started by this process: no zombie left
            return _final(run_dir, json.loads(exit_file.read_text()))
        runner = _read_json(run_dir / "runner.json")
        pid = int(run.backend_ref or 0)
        if alive(pid):
            return Status("running" if runner else "submitted", started_at=runner.get("started_at"))
        if _read_json(exit_file):  # finished between the two checks
            return self.status(run)
        if lock_held(run_dir):  # the supervisor is gone; its trainer got SIGTERM and ends
            return Status(
                "stopping",
                detail="the supervisor is gone; the trainer checkpoints and ends",
                started_at=runner.get("started_at"),
            )
        return Status(
            "interrupted",
            reason="the local runner process ended without a result "
            "(killed?); resume with `finetune launch --resume RUN`",
            started_at=runner.get("started_at"),
        )

    def metrics(self, run) -> list[mt.EpochMetrics]:
        return mt.read(Path(run.run_dir) / "ml" / "output" / "data" / mt.METRICS_FILE)

    def logs(self, run, offset: int = 0) -> tuple[str, int]:
        log = Path(run.run_dir) / "train.log"
        if not log.exists():
            return "", offset
        with open(log, "rb") as f:
            f.seek(offset)
            data = f.read()
        return data.decode("utf-8", "replace"), offset + len(data)

    def stop(self, run) -> None:
        pid = int(run.backend_ref or 0)
        if alive(pid):
            os.kill(pid, signal.SIGTERM)  # the runner forwards it; the trainer checkpoints
            return
        trainer = int(_read_json(Path(run.run_dir) / "runner.json").get("trainer_pid") or 0)
        if lock_held(Path(run.run_dir)) and alive(trainer):  # its supervisor was killed
            os.kill(trainer, signal.SIGTERM)
            return
        raise UsageError(f"run {run.id} is not running", "nothing to stop.")

    def fetch_model(self, run, dest: Path) -> Path:
        """The model folder the trainer wrote in the run's folder (nothing to download)."""
        return Path(run.run_dir or ".") / "ml" / "model"

    def tensorboard_location(self, run) -> str | None:
        """The run's /opt/ml tree is RUN_DIR/ml (mltree): its output/tensorboard folder."""
        return str(Path(run.run_dir) / "ml" / TENSORBOARD_SUBDIR) if run.run_dir else None


# what the trainer leaves in output/data beside the metrics, kept in the ledger when it ends
_OUTPUT_FACTS = {
    "run_record": "run-record.json",
    "summary": "summary.json",
    "val_report": "val-report.json",
    "test_report": "test-report.json",
}


def _output_facts(run_dir: Path) -> dict | None:
    data = run_dir / "ml" / "output" / "data"
    facts = {key: _read_json(data / name) for key, name in _OUTPUT_FACTS.items()}
    facts = {k: v for k, v in facts.items() if v}
    return facts or None


class _Times(TypedDict):
    """What every final Status of a local run carries besides its state and reason."""

    started_at: float | None
    ended_at: float | None
    facts: dict[str, Any] | None


def _final(run_dir: Path, info: dict) -> Status:
    """How the trainer ended, from its exit code and what it left in the ml tree: "completed"
    only with the model written; a signal's stop (EXIT_STOPPED, the marker) or kill is
    "interrupted" -- "stopped" when the user asked -- and resumable."""
    code = info.get("exit_code")
    times = _Times(
        started_at=info.get("started_at"),
        ended_at=info.get("ended_at"),
        facts=_output_facts(run_dir),
    )
    ml = run_dir / "ml"
    asked = bool(info.get("stop_requested"))
    resume = "resume with `finetune launch --resume RUN`"
    marker = container.read_stopped(ml)
    if code == container.EXIT_STOPPED or marker:
        why = (marker or {}).get("reason") or f"the trainer stopped after a checkpoint ({code})"
        return Status("stopped" if asked else "interrupted", reason=f"{why}; {resume}", **times)
    if code == 0 and container.model_written(ml / "model"):
        return Status("completed", **times)
    if code == 0:  # never "completed" without the model (a trainer older than its marker)
        why = "the trainer ended without writing the model"
        return Status("stopped" if asked else "interrupted", reason=f"{why}; {resume}", **times)
    failure = ml / "output" / "failure"
    reason = failure.read_text()[:1024].strip() if failure.exists() else ""
    if isinstance(code, int) and code < 0 and not reason:  # killed: it could not checkpoint
        name = _signal_name(-code)
        why = f"the trainer was killed by {name} (its newest checkpoint is kept)"
        return Status("stopped" if asked else "interrupted", reason=f"{why}; {resume}", **times)
    if asked and not reason:
        return Status("stopped", reason=f"trainer exited with {code} after a stop", **times)
    return Status("failed", reason=reason or f"trainer exited with code {code}", **times)


def _take_lock_soon(run_dir: Path, wait_s: float = 10.0):
    """The run's lock; when the last attempt has ended (exit.json) its supervisor may still
    hold it for a moment on its way out, so wait for that, not for a live one."""
    deadline = time.monotonic() + wait_s
    while (lock := take_lock(run_dir)) is None and (run_dir / "exit.json").exists():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return lock


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _reap(pid: int, wait_s: float = 5.0) -> None:
    """Collect the exit status of a runner this process started (it writes exit.json just
    before it exits, so give it a moment); nothing for another process's runner."""
    deadline = time.monotonic() + wait_s
    while pid > 0:
        try:
            if os.waitpid(pid, os.WNOHANG) != (0, 0) or time.monotonic() > deadline:
                return
        except (ChildProcessError, OSError):
            return
        time.sleep(0.02)
