"""The files a run leaves besides its checkpoints, written by the first host's rank 0 for the
epoch loop (finetune.train.fitloop): run-record.json, the metrics file, every epoch's
predictions, the best epoch's and the test split's reports, summary.json, and the model
folder (the engine's files, classes.json, the preprocessing contract, hyperparameters.json
last: a model folder with it is complete, finetune.contracts.container.model_written).

Everything is passed in; every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from finetune.contracts import metrics
from finetune.contracts.container import TrainJob
from finetune.contracts.hparams import TrainHyperparameters
from finetune.contracts.record import RECORD_FILE, launch_record, manifest_sha256
from finetune.files import write_atomic
from finetune.train import preprocess
from finetune.train.evaluation import Evaluation
from finetune.train.progress import Progress

SUMMARY_FILE = "summary.json"  # best epoch, its validation and the test figures
PREDICTIONS_DIR = "predictions"  # <split>-epoch-NNN.csv: every epoch's predictions


def write_record(
    job: TrainJob, hp: TrainHyperparameters, environment: dict, note: str | None
) -> dict:
    """run-record.json: the launch-side record plus what only this machine knows (the
    engine's ``environment``, the hyperparameters it trains with, the rescale ``note``);
    returns the record."""
    record = launch_record(manifest_sha256(job.channels["train"]))
    record.update(environment)
    record["hyperparameters"] = hp.to_strings()
    record["rescaled"] = note
    record["preprocessing"] = preprocess.Preprocessing.from_hparams(hp).model_dump()
    out = job.layout.output_data_dir
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / RECORD_FILE, json.dumps(record, indent=1, default=str) + "\n")
    return record


def rewrite_metrics(job: TrainJob, events: list[dict]) -> None:
    """metrics.jsonl = the events the checkpoint knows: a restart after a crash between an
    epoch's event and its checkpoint must not leave that epoch in the file twice."""
    job.metrics_file.parent.mkdir(parents=True, exist_ok=True)
    lines = [metrics.EpochMetrics.model_validate(e).model_dump_json() + "\n" for e in events]
    write_atomic(job.metrics_file, "".join(lines))


def save_validation(
    job: TrainJob, val: Evaluation, epoch: int, best: bool, classes: list[str]
) -> None:
    """The epoch's validation predictions; the report too when the epoch is the best yet."""
    out = job.layout.output_data_dir
    val.save_predictions(out / PREDICTIONS_DIR / f"val-epoch-{epoch:03d}.csv")
    if best:
        val.save_report(out, classes, epoch)


def save_test(job: TrainJob, test: Evaluation, classes: list[str], progress: Progress) -> None:
    """The test split's report and predictions, and its accuracy in the last epoch's event."""
    out = job.layout.output_data_dir
    test.save_report(out, classes, progress.best_epoch)
    test.save_predictions(out / PREDICTIONS_DIR / "test.csv")
    if progress.events:
        progress.events[-1]["test_acc"] = test.accuracy
        rewrite_metrics(job, progress.events)


def write_summary(job: TrainJob, progress: Progress, test: Evaluation | None) -> None:
    """summary.json: the best epoch, its validation accuracy and the test figures."""
    summary = {
        "best_epoch": progress.best_epoch,
        "best_val_acc": progress.best_val_acc,
        "test_acc": test.accuracy if test else None,
        "test_count": test.count if test else None,
        "epochs": len(progress.events),
    }
    out = job.layout.output_data_dir
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / SUMMARY_FILE, json.dumps(summary, indent=1) + "\n")


def write_model(
    model_dir: Path,
    export: Callable[[Path], None],
    hp: TrainHyperparameters,
    classes: list[str],
    progress: Progress,
) -> None:
    """The model folder: the engine's files (``export``), the preprocessing contract,
    classes.json, and hyperparameters.json with which epoch the weights come from."""
    model_dir.mkdir(parents=True, exist_ok=True)
    export(model_dir)
    contract = preprocess.Preprocessing.from_hparams(hp)
    preprocess.save(contract, model_dir)
    classes_doc = {
        "classes": classes,
        "image_size": hp.image_size,
        "mean": list(hp.mean),
        "std": list(hp.std),
        "input": contract.layout,
        "best_epoch": progress.best_epoch,
        "best_val_acc": progress.best_val_acc,
    }
    write_atomic(model_dir / "classes.json", json.dumps(classes_doc, indent=2) + "\n")
    write_atomic(model_dir / "hyperparameters.json", json.dumps(hp.to_strings(), indent=2) + "\n")
