"""The local backend end to end: real training in a subprocess, the ledger, stop and resume."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from typer.testing import CliRunner

from finetune.backends.local.runner import lock_held
from finetune.cli import app
from finetune.contracts.metrics import read as read_metrics
from finetune.runs.ledger import open_default

pytestmark = pytest.mark.slow

SMOKE = ["smoke-resnet18", "image_size=32", "batch_per_device=8"]


def _cli(*args: str):
    res = CliRunner().invoke(app, list(args))
    return res


def _wait(pred, timeout: float = 120.0, every: float = 0.3):
    end = time.time() + timeout
    while time.time() < end:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting")


def _run():
    with open_default() as ledger:
        runs = ledger.list()
        assert len(runs) == 1
        return runs[0], ledger.epochs(runs[0].id)


def test_launch_trains_records_and_reports(tiny_dataset):
    res = _cli("launch", *SMOKE, "--dataset", str(tiny_dataset), "epochs=2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{") :])
    assert out["status"] == "completed" and len(out["epochs"]) == 2
    run, epochs = _run()
    assert run.status == "completed" and run.ended_at > run.started_at
    assert [e.epoch for e in epochs] == [0, 1]
    assert all(e.samples_per_sec > 0 and e.val_acc is not None for e in epochs)
    model_dir = os.path.join(run.run_dir, "ml", "model")
    assert os.listdir(model_dir)  # the trained model artifact is there
    # the other commands see the same run
    assert run.id in _cli("runs", "list").output
    shown = _cli("runs", "show", run.id[:12])
    assert shown.exit_code == 0 and "completed" in shown.output and "epoch   2" in shown.output
    best = epochs[-1].best_epoch
    assert best in (0, 1) and f"weights of epoch {best + 1}, the best validation" in shown.output
    assert "per class  (val, 8 classes" in shown.output
    assert "finetune-metrics epoch=0 " in _cli("runs", "logs", run.id, "--raw").output
    logs = _cli("runs", "logs", run.id).output  # for people: epochs from 1, as runs show
    assert "epoch 1: " in logs and "epoch 2: " in logs and "finetune-metrics" not in logs
    # the reproducibility record: launch side in the ledger, trainer side in the final facts
    assert run.record["dataset_manifest_sha256"] == run.plan["dataset"]["manifest_sha256"]
    assert run.record["git_commit"] and run.record["finetune"]
    data = _show(run.id)
    assert data["model_epoch"] == best + 1  # JSON counts from 1, as runs show
    assert data["run_record"]["framework"]["mxnet"]
    assert data["run_record"]["dataset_manifest_sha256"] == run.record["dataset_manifest_sha256"]
    assert data["val_report"]["epoch"] == best + 1
    # a run without the tensorboard logger has no TensorBoard files, and says how to get them
    none = _cli("runs", "show", run.id, "--tensorboard")
    assert none.exit_code == 3 and "wrote no TensorBoard files" in none.output
    assert "To fix: launch with `metric_logging.loggers=[tensorboard]`" in none.output


def test_the_torch_engine_runs_through_the_same_backend_and_ledger(tiny_dataset):
    res = _cli(
        "launch", "smoke-resnet18-torch", "--dataset", str(tiny_dataset), "--json",
        "metric_logging.loggers=[tensorboard]",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    run, epochs = _run()
    assert run.status == "completed" and [e.epoch for e in epochs] == [0, 1]
    assert run.plan["hyperparameters"]["engine"] == "torch"
    assert all(e.val_count == 48 and e.samples == 80 for e in epochs)
    assert _show(run.id)["run_record"]["engine"] == "torch"
    assert os.path.isfile(os.path.join(run.run_dir, "ml", "model", "model.pt"))
    # `runs show --tensorboard` names the folder the trainer wrote, and TensorBoard's own
    # loader finds there the validation accuracy the ledger holds
    shown = _cli("runs", "show", run.id[:12], "--tensorboard")
    folder = os.path.join(run.run_dir, "ml", "output", "tensorboard")
    assert shown.exit_code == 0, shown.output
    assert f"(folder): {folder}\n" in shown.output
    assert f"Open them: tensorboard --logdir {folder}\n" in shown.output
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(folder, size_guidance={"scalars": 0}).Reload()
    logged = [e.value for e in acc.Scalars("epoch/val_acc")]
    assert logged == pytest.approx([e.val_acc for e in epochs])


def test_stop_then_resume_continues_from_the_checkpoint(tiny_dataset):
    # three of the ten batches an epoch: six epochs still leave the stop (sent once the first
    # epoch shows) seconds to arrive, and the resume trains no more than the test reads
    short = ["epochs=6", "train.max_batches_per_epoch=3"]
    res = _cli("launch", *SMOKE, "--dataset", str(tiny_dataset), *short, "--detach")
    assert res.exit_code == 0, res.output
    run, _ = _run()
    # at least one epoch done: its line in the metrics file, read every 50 ms (a `runs show`
    # costs ~40 ms of CPU: every 0.3 s through the trainer's start it was ~1 CPU-s), then
    # one `runs show` that syncs the ledger and must see it
    metrics = os.path.join(run.run_dir, "ml", "output", "data", "metrics.jsonl")
    _wait(lambda: read_metrics(metrics), every=0.05)
    assert _show(run.id)["epochs"]
    assert _cli("runs", "stop", run.id).exit_code == 0
    _wait(lambda: not lock_held(run.run_dir), every=0.05)  # no process of the run is left
    stopped = _wait(
        lambda: (
            (r := _cli("runs", "show", run.id, "--json"))
            and json.loads(r.output)["status"] in ("stopped", "completed")
            and json.loads(r.output)
        )
    )
    if stopped["status"] == "completed":
        pytest.skip("the run finished before the stop arrived (machine too fast)")
    done_before = len(stopped["epochs"])
    assert done_before < 6
    res = _cli("launch", "--resume", run.id, "--json")
    assert res.exit_code == 0, res.output
    final = json.loads(res.output[res.output.index("{") :])
    assert final["status"] == "completed"
    assert [e["epoch"] for e in final["epochs"]] == list(range(1, 7))  # JSON: from 1
    with open_default() as ledger:
        kinds = [k for _, k, _ in ledger.events(run.id)]
    assert "resume" in kinds


def test_a_killed_runner_takes_its_trainer_along_and_resume_waits(tiny_dataset, tmp_path):
    """SIGKILL of the supervisor (runner.json's pid): the trainer ends too (parent-death
    signal), the run is interrupted, and a resume is refused while any process still holds
    the run's lock."""
    import subprocess
    import sys

    res = _cli("launch", *SMOKE, "--dataset", str(tiny_dataset), "epochs=50", "--detach")
    assert res.exit_code == 0, res.output
    run, _ = _run()
    # read every 50 ms: the kill comes while the trainer starts (before its SIGTERM handler,
    # ~0.6 s in), so the parent-death signal ends it at once instead of after its whole
    # start-up and a checkpoint (~4 CPU-s of a process no test waits for)
    runner = _wait(lambda: _read(run.run_dir, "runner.json"), every=0.05)
    os.kill(runner["runner_pid"], signal.SIGKILL)
    _wait(lambda: not _alive(runner["trainer_pid"]))  # no trainer left to write metrics
    shown = _wait(lambda: (r := _show(run.id)) and r["status"] not in ("running", "stopping") and r)
    assert shown["status"] == "interrupted"
    lock = os.path.join(run.run_dir, "run.lock")
    holder = subprocess.Popen(  # a process of the run that is still alive
        [sys.executable, "-c", "import fcntl,sys,time; f=open(sys.argv[1],'a');"
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)", lock],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == b"held\n"
        res = _cli("launch", "--resume", run.id)
        assert res.exit_code == 2 and "still stopping" in res.output, res.output
        assert "To fix:" in res.output
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert _show(run.id)["status"] == "interrupted"  # the refusal changed nothing


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _show(run_id: str) -> dict:
    res = _cli("runs", "show", run_id, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _read(run_dir: str, name: str) -> dict | None:
    try:
        with open(os.path.join(run_dir, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def test_bad_launches_fail_before_anything_runs(tiny_dataset, tmp_path):
    res = _cli("launch", "smoke-resnet18", "--dataset", str(tmp_path))
    assert res.exit_code == 3 and "not a prepared dataset" in res.output
    res = _cli("launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "epocs=2")
    assert res.exit_code == 4 and "epochs" in res.output
    res = _cli("launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "--gpus", "a,b")
    assert res.exit_code == 2 and "--gpus" in res.output
    with open_default() as ledger:
        assert ledger.list() == []


def test_a_test_split_travels_to_the_trainer_and_is_scored_once(image_folder, tmp_path):
    """prepare --test-per-class -> launch: the held-out split reaches the trainer through the
    validation channel, the best model is scored on it once, and runs show says so."""
    from finetune.data.datasets import prepare_folder

    ds = tmp_path / "withtest"
    params = dict(train_per_class=8, test_per_class=3, resize=40, quality=90)
    prepare_folder(image_folder, ds, "shapes", params, workers=1)
    dry = _cli("launch", *SMOKE, "--dataset", str(ds), "--dry-run")
    assert "64 train / 40 val / 24 held-out test images" in dry.output, dry.output
    res = _cli("launch", *SMOKE, "--dataset", str(ds), "epochs=2")
    assert res.exit_code == 0, res.output
    run, epochs = _run()
    assert run.plan["dataset"]["test_count"] == 24
    assert epochs[0].test_acc is None and epochs[-1].test_acc is not None
    channel = os.path.join(run.run_dir, "ml", "input", "data", "validation")
    assert {"shapes_test.rec", "shapes_test.idx"} <= set(os.listdir(channel))
    shown = _cli("runs", "show", run.id)
    assert "on the held-out test split (24 images)" in shown.output, shown.output
    assert _show(run.id)["test_report"]["count"] == 24
