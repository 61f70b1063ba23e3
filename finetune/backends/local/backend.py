"""The local backend: the trainer in a subprocess on this machine (CPU or local GPUs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from finetune import metrics as mt
from finetune.backends.base import Capabilities, Status
from finetune.errors import UsageError
from finetune.train import mltree


def run_dir_for(run_id: str) -> Path:
    from finetune import settings

    return settings.get().data_dir / "runs" / run_id


class LocalBackend:
    name = "local"
    capabilities = Capabilities(spot=False, multi_node=False, gpus=True, stop=True)

    def __init__(self, gpu_ids: tuple[int, ...] = ()) -> None:
        self.gpu_ids = gpu_ids  # becomes CUDA_VISIBLE_DEVICES

    def submit(self, plan, run) -> str:
        """Lay out RUN_DIR/ml, then start the supervisor detached; returns its pid."""
        run_dir = Path(run.run_dir)
        mltree.layout(run_dir / "ml", plan)
        (run_dir / "plan.json").write_text(plan.to_json())
        for stale in ("exit.json", "runner.json"):  # a resumed run starts a new attempt
            (run_dir / stale).unlink(missing_ok=True)
        env = dict(os.environ)
        if plan.resources.device == "gpu" and self.gpu_ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpu_ids)
        with open(run_dir / "runner.log", "ab") as runner_log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, "-m", "finetune.backends.local.runner", str(run_dir)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=runner_log,
                start_new_session=True,  # survives the terminal: `launch --detach`
            )
        return str(proc.pid)

    def status(self, run) -> Status:
        run_dir = Path(run.run_dir)
        exit_file = run_dir / "exit.json"
        if exit_file.exists():
            _reap(int(run.backend_ref or 0))  # started by this process: no zombie left
            return _final(run_dir, json.loads(exit_file.read_text()))
        runner = _read_json(run_dir / "runner.json")
        pid = int(run.backend_ref or 0)
        if _alive(pid):
            return Status("running" if runner else "submitted", started_at=runner.get("started_at"))
        if _read_json(exit_file):  # finished between the two checks
            return self.status(run)
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
        if not _alive(pid):
            raise UsageError(f"run {run.id} is not running", "nothing to stop.")
        os.kill(pid, signal.SIGTERM)  # the runner forwards it; the trainer checkpoints


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


def _final(run_dir: Path, info: dict) -> Status:
    code = info.get("exit_code")
    times = dict(
        started_at=info.get("started_at"),
        ended_at=info.get("ended_at"),
        facts=_output_facts(run_dir),
    )
    failure = run_dir / "ml" / "output" / "failure"
    if code == 0:
        state = "stopped" if info.get("stop_requested") else "completed"
        return Status(state, **times)
    reason = failure.read_text()[:1024].strip() if failure.exists() else ""
    if info.get("stop_requested") and not reason:
        return Status("stopped", reason=f"trainer exited with {code} after a stop", **times)
    return Status("failed", reason=reason or f"trainer exited with code {code}", **times)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _reap(pid: int, wait_s: float = 5.0) -> None:
    """Collect the exit status of a runner this process started (it writes exit.json just
    before it exits, so give it a moment); nothing for another process's runner."""
    import time

    deadline = time.monotonic() + wait_s
    while pid > 0:
        try:
            if os.waitpid(pid, os.WNOHANG) != (0, 0) or time.monotonic() > deadline:
                return
        except (ChildProcessError, OSError):
            return
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of this very process counts as ended
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True
