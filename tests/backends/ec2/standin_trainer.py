"""A stand-in for `python -m finetune.train`, for fast tests of the agent's supervision.

It keeps the trainer's contract where the agent can see it: reads FINETUNE_ML_ROOT's
config, resumes from the newest complete ckpt-NNNNNN, appends one metrics event per epoch,
checkpoints every epoch (keeping two), on SIGTERM checkpoints and exits as the trainer does
(EXIT_STOPPED and its output/stopped.json), writes the model folder (the trainer's model
files) at the end. STANDIN_EPOCH_SECONDS sets the pace; STANDIN_FAIL=1 makes it fail;
STANDIN_STOP_AT_EPOCH=N stops it at epoch N as a SIGTERM to the trainer alone would;
STANDIN_HOLD_AT_EPOCH=N holds it at epoch N (its checkpoint written) until a SIGTERM comes, so
a test that interrupts it cannot lose the race to the end of the run on a loaded machine. With
the tensorboard logger in the hyperparameters it appends a line per epoch to an event file of
its own in output/tensorboard, as tensorboardX does (a new file per process).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from finetune.contracts.container import EXIT_STOPPED, MODEL_FILES, mark_stopped

STOP = {"now": False}
HOLD_LIMIT_S = 300.0


def _stop(signum, frame):
    STOP["now"] = True


def _latest(ckpts: Path) -> dict:
    for folder in sorted(ckpts.glob("ckpt-*"), reverse=True):
        if (folder / "COMPLETE").is_file():
            return json.loads((folder / "state.json").read_text())
    return {"epoch": 0, "seq": 0}


def _save(ckpts: Path, state: dict) -> None:
    state["seq"] += 1
    tmp = ckpts / f".tmp-ckpt-{state['seq']:06d}"
    tmp.mkdir(parents=True)
    (tmp / "model.params").write_bytes(os.urandom(2048))
    (tmp / "state.json").write_text(json.dumps(state))
    (tmp / "COMPLETE").write_text(json.dumps({"files": {"state.json": 0}}))
    tmp.rename(ckpts / f"ckpt-{state['seq']:06d}")
    for old in sorted(ckpts.glob("ckpt-*"))[:-2]:
        shutil.rmtree(old)


def _tensorboard_file(root: Path, hp: dict) -> Path | None:
    if "tensorboard" not in json.loads(hp.get("metric_loggers") or "[]"):
        return None
    folder = root / "output" / "tensorboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"events.out.tfevents.{time.time_ns()}.standin-{os.getpid()}"


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    root = Path(os.environ["FINETUNE_ML_ROOT"])
    config = root / "input" / "config"
    hp = json.loads((config / "hyperparameters.json").read_text())
    ckpts = Path(json.loads((config / "checkpointconfig.json").read_text())["LocalPath"])
    epochs, pace = int(hp["epochs"]), float(os.environ.get("STANDIN_EPOCH_SECONDS", "0.2"))
    state = _latest(ckpts)
    events = _tensorboard_file(root, hp)
    print(f"standin: resuming at epoch {state['epoch']}" if state["seq"] else "standin: start")
    if os.environ.get("STANDIN_FAIL"):
        (root / "output" / "failure").write_text("standin: asked to fail")
        return 3
    stop_at = int(os.environ.get("STANDIN_STOP_AT_EPOCH") or -1)
    hold_at = int(os.environ.get("STANDIN_HOLD_AT_EPOCH") or -1)
    while state["epoch"] < epochs:
        # held: until the SIGTERM, bounded so a test that never sends it fails, not hangs
        deadline = time.time() + (HOLD_LIMIT_S if state["epoch"] == hold_at else pace)
        while time.time() < deadline and not STOP["now"]:
            time.sleep(0.01)
        if state["epoch"] == hold_at and not STOP["now"]:
            (root / "output" / "failure").write_text("standin: held, and no SIGTERM came")
            return 3
        if STOP["now"] or state["epoch"] == stop_at:
            _save(ckpts, state)
            print(f"standin: stopped in epoch {state['epoch']}, checkpointed", flush=True)
            mark_stopped(root, "SIGTERM", f"epoch {state['epoch'] + 1}")
            return EXIT_STOPPED
        event = dict(
            epoch=state["epoch"],
            samples=80,
            samples_per_sec=100.0 + state["epoch"],
            epoch_seconds=pace,
            train_loss=1.0,
            train_acc=0.5,
            lr=0.01,
            time=time.time(),
        )
        with open(root / "output" / "data" / "metrics.jsonl", "a") as f:
            f.write(json.dumps(event) + "\n")
        if events is not None:
            with open(events, "a") as f:
                f.write(f"epoch {state['epoch']}\n")
        state["epoch"] += 1
        _save(ckpts, state)
        print(f"standin: epoch {state['epoch']} done", flush=True)
    (root / "model" / "model.params").write_bytes(b"weights")
    for name in MODEL_FILES:
        (root / "model" / name).write_text("{}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
