"""The agent's life: lay out /opt/ml from S3, run the trainer, keep S3 current, end cleanly.

prepare   plan.json + dataset + checkpoints (+ the log so far) from S3 -> an /opt/ml tree
supervise the trainer as a child; every ``upload_interval`` s: checkpoints, metrics, log,
          status; every ``poll_interval`` s: IMDS spot/instance-action. On a notice or on
          SIGTERM: SIGTERM to the trainer (it checkpoints and exits), upload, "interrupted".
finish    model + final status to S3, exit code (0, 1, or 75 = interrupted), shutdown command;
          a trainer that stopped by itself after a checkpoint (its exit code 75, the same
          EX_TEMPFAIL, or its output/stopped.json) is "interrupted" too, and "completed" needs
          the model written
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.environment import AgentConfig
from finetune.backends.ec2.agent.imds import Imds, ImdsUnavailable
from finetune.backends.ec2.agent.s3sync import RunStore
from finetune.contracts import container
from finetune.contracts.container import Layout


class AgentError(Exception):
    """The run cannot start here (missing plan or dataset); recorded as a failure."""


class StopSignal:
    """SIGTERM/SIGINT become a flag and wake the supervision loop (an Event)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.name = signal.Signals(signum).name
        self.event.set()


@dataclass
class Attempt:
    cfg: AgentConfig
    store: RunStore
    imds: Imds
    prior_metrics: str = ""
    instance_id: str | None = None
    started_at: float = 0.0
    imds_warned: bool = False
    host: str = "algo-1"  # multi-host runs: this instance's name (algo-1 writes the outputs)
    env: dict = field(default_factory=dict)  # extra environment of the trainer

    @property
    def primary(self) -> bool:
        return self.host == "algo-1"

    def _key(self, name: str) -> str:
        """Where this host's ``name`` goes: the run's own for algo-1, hosts/NAME/ otherwise."""
        return name if self.primary else f"hosts/{self.host}/{name}"

    def say(self, message: str) -> None:
        """One agent line on stderr and in the run's log (users read it with `runs logs`)."""
        line = f"[finetune-agent attempt {self.cfg.attempt}] {message}\n"
        sys.stderr.write(line)
        self.cfg.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.cfg.log_file, "a", encoding="utf-8") as f:
            f.write(line)

    def status(self, state: str, key: str | None = None, **fields) -> dict:
        return self.store.write_status(
            state,
            key=key or self._key(p.STATUS),
            host=self.host,
            attempt=self.cfg.attempt,
            instance_id=self.instance_id,
            started_at=self.started_at,
            **self.progress(),
            **fields,
        )

    def progress(self) -> dict:
        events = _merged_metrics(self.prior_metrics, self._local_metrics())
        if not events:
            return {"epochs_done": 0}
        last = events[max(events)]
        return {"epochs_done": len(events), "images_per_sec": last.get("samples_per_sec")}

    def upload(self) -> None:
        """Checkpoints, TensorBoard files, metrics, log and failure reason to S3 (unchanged
        files are skipped)."""
        root = self.cfg.ml_root
        if not self.primary:  # the first host writes the run's outputs; the others their log
            self.store.upload_file(self.cfg.log_file, self._key(p.LOG))
            return
        self.store.mirror_tree(root / "checkpoints", p.CHECKPOINTS)
        # added to, never mirrored: a relaunch starts on a fresh instance with an empty
        # folder, and the earlier attempts' event files stay (TensorBoard merges them)
        self.store.upload_tree(Layout(root).tensorboard_dir, p.TENSORBOARD)
        merged = _merged_metrics(self.prior_metrics, self._local_metrics())
        if merged:
            text = "".join(json.dumps(merged[k]) + "\n" for k in sorted(merged))
            self.store.write_text(p.METRICS, text, "application/x-ndjson")
        self.store.upload_file(self.cfg.log_file, p.LOG)
        self.store.upload_file(root / "output" / "failure", p.FAILURE)

    def _local_metrics(self) -> str:
        path = self.cfg.ml_root / "output" / "data" / "metrics.jsonl"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def spot_notice(self) -> str | None:
        """A description of a pending spot interruption, or None (IMDS errors are no notice)."""
        try:
            action = self.imds.spot_action()
        except ImdsUnavailable as exc:
            if not self.imds_warned:
                self.say(f"cannot poll for spot notices: {exc}")
                self.imds_warned = True
            return None
        if not action:
            return None
        return f"spot interruption notice: {action.get('action', '?')} at {action.get('time', '?')}"


def _merged_metrics(*texts: str) -> dict[int, dict]:
    """Epoch events by epoch; later texts win (a resumed attempt may repeat an epoch)."""
    out: dict[int, dict] = {}
    for text in texts:
        for line in text.splitlines():
            try:
                event = json.loads(line)
                out[int(event["epoch"])] = event
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line of a killed writer
    return out


def supervise(run: Attempt, stop: StopSignal) -> int:
    """Run the trainer to its end or to an interruption; returns the agent's exit code."""
    cfg = run.cfg
    early = f"{stop.name} received" if stop.name else run.spot_notice()
    if early:  # EC2 is taking the instance back while it boots: no training starts here
        run.say(f"{early} before the trainer started: not starting it")
        return _finish(run, None, early, "spot" if "spot" in early else "signal")
    env = dict(os.environ, FINETUNE_ML_ROOT=str(cfg.ml_root), PYTHONUNBUFFERED="1", **run.env)
    with open(cfg.log_file, "ab") as log:
        child = subprocess.Popen(
            list(cfg.trainer),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    run.say(f"trainer started (pid {child.pid})")
    run.status(p.RUNNING)
    reason = _watch(run, child, stop)
    if reason:
        run.say(f"{reason}: asking the trainer to checkpoint and stop")
        _stop_child(child, cfg.stop_grace)
    code = child.wait()
    return _finish(run, code, reason, "spot" if reason and "spot" in reason else "signal")


def _watch(run: Attempt, child: subprocess.Popen, stop: StopSignal) -> str | None:
    """Wait for the trainer's end, uploading and polling; returns why it must stop, if so."""
    cfg = run.cfg
    next_upload = time.monotonic() + cfg.upload_interval
    while child.poll() is None:
        if stop.name:
            return f"{stop.name} received"
        notice = run.spot_notice()
        if notice:
            return notice
        if time.monotonic() >= next_upload:
            _try(run, run.upload)
            _try(run, lambda: run.status(p.RUNNING))
            next_upload = time.monotonic() + cfg.upload_interval
        stop.event.wait(min(cfg.poll_interval, max(next_upload - time.monotonic(), 0.05)))
    return None


def _stop_child(child: subprocess.Popen, grace: float) -> None:
    child.send_signal(signal.SIGTERM)  # the trainer checkpoints after its current batch
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        child.kill()


def _finish(run: Attempt, code: int | None, reason: str | None, kind: str) -> int:
    """Final uploads and status; the exit code tells the user data what happened. ``code``
    is the trainer's (None: it was never started)."""
    ended_at = time.time()
    if reason:
        trainer = "the trainer was not started" if code is None else f"trainer exit code {code}"
        run.say(f"stopped for a restart ({reason}); {trainer}")
        state, exit_code, extra = p.INTERRUPTED, p.EXIT_INTERRUPTED, dict(reason=reason)
        extra["interruption"] = kind
    elif stopped := _stopped_alone(run, code):  # a signal reached the trainer, not the agent
        run.say(f"the trainer ended unfinished: {stopped}")
        state, exit_code = p.INTERRUPTED, p.EXIT_INTERRUPTED
        extra = dict(reason=stopped, interruption="signal")
    elif code == 0:
        if run.primary:
            _retry(run, lambda: run.store.upload_tree(run.cfg.ml_root / "model", p.MODEL))
        run.say("training completed" + ("; model uploaded" if run.primary else ""))
        state, exit_code, extra = p.COMPLETED, p.EXIT_COMPLETED, {}
    else:
        failure = run.cfg.ml_root / "output" / "failure"
        why = failure.read_text()[:1024].strip() if failure.is_file() else ""
        why = why or f"the trainer exited with code {code}"
        run.say(f"training failed: {why}")
        state, exit_code, extra = p.FAILED, p.EXIT_FAILED, dict(reason=why)
    _retry(run, run.upload)
    _retry(run, lambda: run.status(state, **extra, ended_at=ended_at, exit_code=code))
    return exit_code


def _stopped_alone(run: Attempt, code: int | None) -> str | None:
    """Why the run is unfinished although the trainer ended by itself: it exited with
    EXIT_STOPPED or left its stop marker, or (the first host) exited 0 without writing the
    model -- a run is never "completed" without its model. None: finished, or failed."""

    marker = container.read_stopped(run.cfg.ml_root)
    if code == container.EXIT_STOPPED or marker:
        return (marker or {}).get("reason") or f"trainer exit code {code}"
    if code == 0 and run.primary and not container.model_written(run.cfg.ml_root / "model"):
        return "the trainer ended without writing the model"
    return None


def _try(run: Attempt, action) -> bool:
    """One upload at the steady cadence: a transient S3 error must not end the training."""
    try:
        action()
        return True
    except Exception as exc:  # boto3 raises many kinds; the next round retries
        run.say(f"upload failed, retrying at the next interval: {exc}")
        return False


def _retry(run: Attempt, action, tries: int = 3) -> None:
    for n in range(tries):
        if _try(run, action):
            return
        time.sleep(min(2**n, 5))
