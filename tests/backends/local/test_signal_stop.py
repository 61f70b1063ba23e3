"""A local run stopped by a signal is never "completed": SIGTERM or SIGKILL to the trainer or
its supervisor, at any moment, leaves an interrupted (or, asked by `runs stop`, stopped) run
that `launch --resume` finishes with every epoch once and, on the torch engine, the very
weights of an uninterrupted run. Two resumes at once start one trainer and keep its record."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.backends.local.runner import lock_held
from finetune.cli import app
from finetune.contracts.container import EXIT_STOPPED, MODEL_FILES
from finetune.contracts.metrics import parse_progress
from finetune.contracts.metrics import read as read_metrics
from finetune.runs.ledger import open_default
from finetune.runs.run import ACTIVE

pytestmark = pytest.mark.slow

TORCH = ["smoke-resnet18-torch", "image_size=32", "batch_per_device=8"]
MXNET = ["smoke-resnet18", "image_size=32", "batch_per_device=8"]


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _wait(pred, timeout: float = 300.0, every: float = 0.25):
    end = time.time() + timeout
    while time.time() < end:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")


def _show(run_id: str) -> dict:
    res = _cli("runs", "show", run_id, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _ended(run_id: str) -> dict:
    """`runs show` once the run has ended (show syncs the ledger with the backend). It is
    asked once no process of the run holds the run's lock (none can still end it): a lock
    tried every 50 ms costs far less CPU than a `runs show` every 250 ms."""
    run_dir = Path(_show(run_id)["run_dir"])
    _wait(lambda: not lock_held(run_dir), every=0.05)
    return _wait(lambda: (d := _show(run_id)) and d["status"] not in ACTIVE and d)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _newest_run_id() -> str:
    with open_default() as ledger:
        return ledger.list()[-1].id


def _model_dir(shown: dict) -> Path:
    return Path(shown["run_dir"]) / "ml" / "model"


def _has_model(shown: dict) -> bool:
    return all((_model_dir(shown) / name).is_file() for name in MODEL_FILES)


def _same_weights(a: Path, b: Path) -> None:
    import torch

    wa, wb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Every trainer here on one intra-op thread, the uninterrupted reference of
    ``plain_torch`` included: the same weights bit for bit need the same thread count."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def plain_torch(tiny_dataset, tmp_path_factory) -> dict:
    """`runs show` of an uninterrupted torch run of two epochs (TORCH, epochs=2): the weights
    that every interrupted and resumed run here must end with. One launch per module (and
    xdist worker) instead of one per test."""
    pytest.importorskip("torch")
    from tests.conftest import isolate

    with pytest.MonkeyPatch.context() as mp:
        isolate(tmp_path_factory, mp)
        mp.setenv("OMP_NUM_THREADS", "1")
        res = _cli("launch", *TORCH, "epochs=2", "--dataset", str(tiny_dataset))
        assert res.exit_code == 0, res.output
        plain = _show(_newest_run_id())
    assert plain["status"] == "completed" and _has_model(plain)
    return plain


def _metrics(shown: dict) -> list:
    return read_metrics(Path(shown["run_dir"]) / "ml" / "output" / "data" / "metrics.jsonl")


def test_sigterm_at_the_first_step_leaves_an_interrupted_run_that_resumes(
    tiny_dataset, monkeypatch, plain_torch
):
    """One SIGTERM to the trainer at epoch 1, step 1 (what `kill` or a shutdown sends): the
    trainer checkpoints and exits 75; the run is interrupted with no model, and
    `launch --resume` completes it with both epochs and an uninterrupted run's weights and
    accuracies. (This also carries what tests/train/engines/torch/test_engine.py's
    stopped-and-resumed test proved with the trainer alone: the stop is said, the progress
    lines parse, the weights are bit-identical; one test now, through the product.)"""
    pytest.importorskip("torch")
    monkeypatch.setenv("FINETUNE_LOG_EVERY", "1")
    res = _cli("launch", *TORCH, "--dataset", str(tiny_dataset), "epochs=2", "--detach")
    assert res.exit_code == 0, res.output
    run_id = _newest_run_id()
    run_dir = Path(_show(run_id)["run_dir"])
    runner = _wait(lambda: _read(run_dir / "runner.json"))
    log = run_dir / "train.log"
    _wait(lambda: log.exists() and "finetune-progress epoch=0 batch=1/" in log.read_text())
    os.kill(runner["trainer_pid"], signal.SIGTERM)

    shown = _ended(run_id)
    assert shown["status"] == "interrupted", shown["exit_reason"]
    assert "stopped by SIGTERM after a checkpoint" in shown["exit_reason"]
    assert "launch --resume" in shown["exit_reason"]
    assert shown["epochs"] == [] and not _has_model(shown)
    assert _wait(lambda: _read(run_dir / "exit.json"))["exit_code"] == EXIT_STOPPED
    assert "interrupted" in _cli("runs", "list").output

    res = _cli("launch", "--resume", run_id, "--json")
    assert res.exit_code == 0, res.output
    final = json.loads(res.output[res.output.index("{") :])
    assert final["status"] == "completed"
    assert [e["epoch"] for e in final["epochs"]] == [1, 2]  # counted from 1 in JSON
    text = log.read_text()
    assert "finetune-resume" in text and "stopped by SIGTERM" in text
    progress = [line for line in text.splitlines() if line.startswith("finetune-progress")]
    assert progress and all(parse_progress(line) for line in progress)  # for live displays

    plain = plain_torch
    assert plain["id"] != run_id and plain["status"] == "completed"
    _same_weights(_model_dir(plain) / "model.pt", _model_dir(final) / "model.pt")
    assert [e.val_acc for e in _metrics(plain)] == [e.val_acc for e in _metrics(final)]


# ---- the stress test --------------------------------------------------------------------------
SEED = int(os.environ.get("FINETUNE_STRESS_SEED") or 25)
MOMENTS = {"torch": 5, "mxnet": 5}  # random interruptions of each engine's run


def _interrupt_at_random(args: list[str], dataset: Path, moments: int, rng: random.Random):
    """Launch, then ``moments`` times: wait a random moment, SIGTERM or SIGKILL the trainer
    or its supervisor, check how the run ended, resume. Returns the finished run."""
    res = _cli("launch", *args, "--dataset", str(dataset), "--detach")
    assert res.exit_code == 0, res.output
    run_id = _newest_run_id()
    run_dir = Path(_show(run_id)["run_dir"])
    for n in range(moments):
        runner = _wait(lambda: _read(run_dir / "runner.json"))
        time.sleep(rng.uniform(0.0, 4.0))
        who = rng.choice(["trainer_pid", "runner_pid"])
        sig = rng.choice([signal.SIGTERM, signal.SIGKILL])
        with contextlib.suppress(ProcessLookupError):  # it had ended already
            os.kill(runner[who], sig)
        shown = _ended(run_id)
        what = f"moment {n}: {sig.name} to the {who[:-4]}, seed {SEED}"
        # the invariant: never "completed" without the model
        assert shown["status"] != "completed" or _has_model(shown), what
        if shown["status"] == "completed":  # the signal came after the end
            return shown
        asked = who == "runner_pid" and sig == signal.SIGTERM  # what `runs stop` does
        log = (run_dir / "train.log").read_text()[-2000:]
        assert shown["status"] == ("stopped" if asked else "interrupted"), (what, shown, log)
        assert not _has_model(shown), what
        if n < moments - 1:
            res = _cli("launch", "--resume", run_id, "--detach")
            assert res.exit_code == 0, (what, res.output)
    res = _cli("launch", "--resume", run_id, "--json")  # the last resume runs to the end
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index("{") :])


def _every_epoch_once(shown: dict, epochs: int) -> None:
    assert shown["status"] == "completed" and _has_model(shown)
    assert [e["epoch"] for e in shown["epochs"]] == list(range(1, epochs + 1))  # JSON: from 1
    metrics = read_metrics(Path(shown["run_dir"]) / "ml" / "output" / "data" / "metrics.jsonl")
    assert [e.epoch for e in metrics] == list(range(epochs))
    assert all(e.samples == 80 for e in metrics)  # each epoch trained on every image once


def test_random_sigterm_and_sigkill_never_complete_a_run_early(tiny_dataset, plain_torch):
    """Bounded stress: ten random moments (seeded: FINETUNE_STRESS_SEED), SIGTERM or SIGKILL
    to the trainer or its supervisor of a torch and of an MXNet run, a resume after each."""
    pytest.importorskip("torch")
    pytest.importorskip("mxnet")
    rng = random.Random(SEED)
    torch_run = _interrupt_at_random([*TORCH, "epochs=2"], tiny_dataset, MOMENTS["torch"], rng)
    _every_epoch_once(torch_run, 2)
    plain = plain_torch  # TORCH, epochs=2, uninterrupted
    _same_weights(_model_dir(plain) / "model.pt", _model_dir(torch_run) / "model.pt")

    mx_run = _interrupt_at_random([*MXNET, "epochs=2"], tiny_dataset, MOMENTS["mxnet"], rng)
    _every_epoch_once(mx_run, 2)


# ---- two resumes at once ----------------------------------------------------------------------
# _STOP_EARLY: the first run of each test below is stopped as soon as its supervisor is there to
# forward the stop (runner.json, read every 50 ms): its trainer ends at once ("stopped" all the
# same), before or after installing its SIGTERM handler (~0.6 s), while it imports its engine
# (finetune.train.signals: start-up); seen after its start-up (~4 CPU-s), it would train a
# batch to checkpoint and stop.
def _resume_detached() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "finetune", "launch", "--resume", _newest_run_id(), "--detach"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_two_resumes_at_once_start_one_trainer_and_keep_its_supervisor(tiny_dataset):
    """`launch --resume --detach` twice at the same moment: one starts, the other is refused
    and changes nothing; the ledger holds the live supervisor, so `runs list` says running
    and `runs stop` asks that supervisor (the run ends "stopped", not "interrupted")."""
    res = _cli("launch", *MXNET, "--dataset", str(tiny_dataset), "epochs=50", "--detach")
    assert res.exit_code == 0, res.output
    run_id = _newest_run_id()
    run_dir = Path(_show(run_id)["run_dir"])
    _wait(lambda: _read(run_dir / "runner.json"), every=0.05)  # (_STOP_EARLY)
    assert _cli("runs", "stop", run_id).exit_code == 0
    assert _ended(run_id)["status"] == "stopped"

    first, second = _resume_detached(), _resume_detached()
    outs = [p.communicate(timeout=120)[0] for p in (first, second)]
    codes = sorted(p.returncode for p in (first, second))
    assert codes == [0, 2], outs
    refused = outs[[first.returncode, second.returncode].index(2)]
    assert "To fix:" in refused and "Traceback" not in refused
    runner = _wait(lambda: _read(run_dir / "runner.json"))
    shown = _show(run_id)
    assert shown["backend_ref"] == str(runner["runner_pid"]) and _alive(runner["runner_pid"])
    assert shown["status"] in ("submitted", "running")
    listed = _cli("runs", "list").output
    assert "stopping" not in listed and "failed" not in listed
    assert _cli("runs", "stop", run_id).exit_code == 0
    assert _ended(run_id)["status"] == "stopped"  # through the supervisor: a stop it asked for


def test_a_resume_refused_by_a_live_process_leaves_the_run_as_it_was(tiny_dataset):
    """The loser's view of that race, made deterministic: the run's record says it ended
    (exit.json), yet another resume's process already holds the run's lock. The refused
    resume exits 2 with advice and neither marks the run failed nor touches its files."""
    res = _cli("launch", *MXNET, "--dataset", str(tiny_dataset), "epochs=50", "--detach")
    assert res.exit_code == 0, res.output
    run_id = _newest_run_id()
    run_dir = Path(_show(run_id)["run_dir"])
    _wait(lambda: _read(run_dir / "runner.json"), every=0.05)  # (_STOP_EARLY)
    assert _cli("runs", "stop", run_id).exit_code == 0
    assert _ended(run_id)["status"] == "stopped"
    holder = subprocess.Popen(  # the winner of the race: it holds the lock, starting up
        [sys.executable, "-c", "import fcntl,sys,time; f=open(sys.argv[1],'a');"
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
         str(run_dir / "run.lock")],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == b"held\n"
        (run_dir / "runner.json").write_text('{"runner_pid": 1, "marker": "the winner\'s"}')
        before = (run_dir / "ml" / "input" / "config" / "hyperparameters.json").stat().st_mtime_ns
        res = _cli("launch", "--resume", run_id, "--detach")
        assert res.exit_code == 2 and "still has a live process" in res.output, res.output
        assert "To fix:" in res.output
        assert "the winner's" in (run_dir / "runner.json").read_text()  # untouched
        after = (run_dir / "ml" / "input" / "config" / "hyperparameters.json").stat().st_mtime_ns
        assert after == before
        with open_default() as ledger:
            assert ledger.get(run_id).status != "failed"
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
