"""`runs logs` counts epochs from 1, as `runs show` does; `--raw` prints the trainer's log as
written, whose machine lines keep the metrics contract's 0-based epoch (what SageMaker's
metric definitions, metrics.jsonl's readers and the live bar parse)."""

from __future__ import annotations

import re
import time

from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import METRIC_REGEXES, BatchProgress, EpochMetrics, parse_progress
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.service.launch import runs_dir
from finetune.train.telemetry import DATA_BOUND, summary_line

RUN = "ft-20261127-040000-beef"


def _epoch(i: int) -> EpochMetrics:
    return EpochMetrics(epoch=i, samples=80, samples_per_sec=40.0 + i, epoch_seconds=62.0,
                        train_loss=1.5 - i / 10, train_acc=0.5, val_acc=0.25 + i / 10,
                        best_epoch=i, lr=0.01)  # fmt: skip


def _log() -> str:
    """A trainer's log of two epochs, its machine lines made by the trainer's own code."""
    progress = BatchProgress(epoch=1, batch=3, steps=10, step=13, lr=0.01, train_loss=1.4,
                             images=24, seconds=2.0, images_per_sec=12.0)  # fmt: skip
    return "\n".join([
        "INFO starting: 2 epochs",
        "finetune-warning metric logger mlflow did not start",  # no epoch: text, as it is
        progress.log_line(),
        _epoch(0).log_line(),
        summary_line(0, {"gpu_util_pct": 71.5}),
        "finetune-resume checkpoint=ckpt-000001 epoch=1 batch=3 step=13",
        _epoch(1).log_line(),
        "finetune-test test_acc=0.9 count=30 best_epoch=1",
        "INFO checkpoint ckpt-000002 (epoch end, best): epoch 2 batch 10 step 20",
    ]) + "\n"  # fmt: skip


def _store() -> str:
    folder = runs_dir() / RUN
    folder.mkdir(parents=True)
    text = _log()
    (folder / "train.log").write_text(text, encoding="utf-8")
    run = Run(RUN, time.time(), "smoke", "shapes", "local", "completed", {}, run_dir=str(folder))
    with open_default() as ledger:
        ledger.create(run)
    return text


def _logs(*args: str) -> str:
    res = CliRunner().invoke(app, ["runs", "logs", RUN, *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_runs_logs_counts_epochs_from_1_and_raw_keeps_the_contract():
    written = _store()
    assert _logs() == (
        "INFO starting: 2 epochs\n"
        "finetune-warning metric logger mlflow did not start\n"
        "epoch 1: 40.0 img/s, 1m 02s, loss 1.500, train_acc 50.0 % val_acc 25.0 %, lr 0.01\n"
        "telemetry, epoch 1: gpu_util_pct=71.5 gpu_mem_gib=n/a input_wait_fraction=n/a "
        f"verdict=n/a (threshold {DATA_BOUND:g}, host wait) input_device_fraction=n/a "
        "warmup_seconds=n/a "
        "validation_seconds=n/a achieved_tflops=n/a peak_tflops=n/a pct_of_peak=n/a\n"
        "resume, epoch 2: checkpoint=ckpt-000001 batch=3 step=13\n"
        "epoch 2: 41.0 img/s, 1m 02s, loss 1.400, train_acc 50.0 % val_acc 35.0 %, lr 0.01\n"
        "test: test_acc=0.9 count=30 best_epoch=2\n"
        "INFO checkpoint ckpt-000002 (epoch end, best): epoch 2 batch 10 step 20\n"
    )
    assert _logs("--follow") == _logs()  # to a pipe, as it comes: the same lines
    raw = _logs("--raw")
    assert raw == written == _logs("--raw", "--follow")
    # what parses the machine lines reads them as before: epochs from 0
    epochs = [int(m) for m in re.findall(METRIC_REGEXES["epoch"], raw)]
    assert epochs == [0, 1]
    assert [parse_progress(line).epoch for line in raw.splitlines() if parse_progress(line)] == [1]
