"""The epoch loop every engine shares, top to bottom: resume, epochs, validation, checkpoints,
the best model, the test split, the artifact.

An engine contributes a :class:`Session` (its devices, network, optimizer and loaders) and
nothing else; this module decides when to train, validate, checkpoint and stop, counts every
validation record exactly once (finetune.train.evaluation), keeps the best-validation
checkpoint, evaluates the held-out test split once with the best weights, and writes the
metrics events, the reports and the model artifact. SIGTERM finishes the batch, checkpoints
and returns.

A session of several processes (the torch engine under torchrun) also provides ``ranks``,
``local_rank`` and ``agree``: after every step all processes agree on stopping and on
checkpointing (so they leave the loop after the same step), every process validates its shard
(rank 0's evaluator counts each record once), and only local rank 0 prints. A session with a
``telemetry`` (finetune.train.telemetry) adds GPU use, input wait and TFLOP/s to each event.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from finetune.contracts import metrics
from finetune.contracts.record import RECORD_FILE, launch_record, manifest_sha256
from finetune.errors import ConfigError
from finetune.files import write_atomic
from finetune.recipes.scaling import LrSchedule, steps_per_epoch
from finetune.train import dataset, preprocess
from finetune.train.checkpoints import Checkpoint, CheckpointDir
from finetune.train.contract import TrainJob
from finetune.train.evaluation import Evaluation, Evaluator, record_labels
from finetune.train.progress import Progress, Stopwatch
from finetune.train.signals import StopRequest
from finetune.train.telemetry import summary_line

LOG_EVERY_ENV = "FINETUNE_LOG_EVERY"  # batches between progress lines (default 50)
PROGRESS_EVERY_S = 2.0  # and at least this often: a terminal shows a live bar from them
SUMMARY_FILE = "summary.json"  # best epoch, its validation and the test figures
PREDICTIONS_DIR = "predictions"  # <split>-epoch-NNN.csv: every epoch's predictions

log = logging.getLogger(__name__)


class Session(Protocol):
    """What an engine provides for one run (see finetune.train.engines)."""

    files: dataset.DatasetFiles  # the prepared splits (checked against the hyperparameters)
    devices: int  # devices in use on this host
    workers: int  # hosts training together
    is_first_host: bool  # the host that validates, checkpoints and writes the outputs

    def build(self, hp, steps: int, resume: Checkpoint | None) -> None:
        """Network, optimizer and loaders for ``hp`` (rescaled to the devices found)."""

    def begin_epoch(self, epoch: int, batch: int) -> None:
        """Position the training loader at ``batch`` of ``epoch`` (0 unless resumed)."""

    def step(self, lr: float) -> int:
        """One optimizer step at ``lr``; returns the images it trained on (this host)."""

    def sync(self) -> tuple[float, int, int]:
        """Wait for queued work; (loss sum, hits, images) since the last sync."""

    def evaluate(self, split: str, evaluator: Evaluator, stop: StopRequest) -> bool:
        """Feed every batch of ``split`` (unshuffled) to ``evaluator``; False if stopped."""

    def write_checkpoint(self, folder: Path) -> None:
        """Parameters and optimizer state into ``folder``."""

    def load_weights(self, checkpoint: Checkpoint) -> None:
        """A checkpoint's parameters into the network (for the best model)."""

    def export(self, model_dir: Path) -> None:
        """The engine's model files into ``model_dir``."""

    def environment(self) -> dict:
        """Framework versions, devices, and the nondeterminism this engine cannot remove."""


@dataclass
class FitResult:
    stopped_by: str | None  # signal name when a stop request ended the run early
    progress: Progress
    resumed_from: str | None = None
    test: Evaluation | None = None


@dataclass
class _Run:
    job: TrainJob
    session: Session
    files: dataset.DatasetFiles
    schedule: LrSchedule
    checkpoints: CheckpointDir
    stop: StopRequest
    hp: object
    val_labels: object = None
    epoch_started: float = 0.0
    timed_here: float = 0.0  # this process's steady-state seconds of the current epoch
    last_save: float = field(default_factory=time.monotonic)
    tallied_step: int = 0  # the step of the last loss sync (the NaN check's resolution)

    @property
    def steps(self) -> int:
        return self.schedule.steps_per_epoch


def fit(job: TrainJob, session: Session, stop: StopRequest | None = None) -> FitResult:
    """Train ``job`` with an engine's ``session``, resuming from the newest checkpoint."""
    stop = StopRequest() if stop is None else stop  # (not `or`: an unset request is falsy)
    files = session.files
    hp, note = rescale(job.hparams, session.devices, session.workers)
    checkpoints = CheckpointDir(job.checkpoint_dir, keep=hp.keep_checkpoints)
    resume = checkpoints.latest()
    if resume is not None:
        resume.check_fits(hp.model, hp.num_classes)
    steps = steps_per_epoch(files.train_count, hp.global_batch_size, hp.max_batches_per_epoch)
    session.build(hp, steps, resume)
    run = _Run(job, session, files, LrSchedule.from_hparams(hp, steps), checkpoints, stop, hp)
    if session.is_first_host:
        run.val_labels = record_labels(files.val_rec, files.val_idx)
        _write_record(run, note)
    if note:
        _say(run, f"finetune-rescale {note}")
    progress = Progress.from_state(resume.state) if resume else Progress()
    progress.batch = min(progress.batch, steps)  # restarted on fewer devices
    if session.is_first_host:  # one metrics file and one checkpoint series per cluster
        _rewrite_metrics(job, progress.events)
    if resume is not None:
        _say(
            run,
            f"finetune-resume checkpoint={resume.directory.name} epoch={progress.epoch} "
            f"batch={progress.batch} step={progress.step}",
        )
    _epochs(run, progress)
    resumed = resume.directory.name if resume else None
    if stop:
        _save(run, progress, stop.signal_name)
        return FitResult(stop.signal_name, progress, resumed)
    test, done = _finish(run, progress) if session.is_first_host else (None, True)
    if not done:  # stopped while scoring the test split: no model yet; a restart scores it
        return FitResult(stop.signal_name, progress, resumed)
    return FitResult(None, progress, resumed, test)


def rescale(hp, devices: int, workers: int):
    """The hyperparameters for the devices and hosts actually found: the linear scaling rule
    applied again from ``lr_per_device`` when they differ from the plan; (hp, note)."""
    if (devices, workers) == (hp.devices_per_host, hp.hosts):
        return hp, None
    total = devices * workers
    update = {
        "devices_per_host": devices,
        "hosts": workers,
        "global_batch_size": hp.batch_size_per_device * total,
        "lr": hp.lr_per_device * total,
    }
    note = (
        f"planned {hp.devices_per_host} device(s) x {hp.hosts} host(s), found {devices} x "
        f"{workers}: global batch {hp.global_batch_size} -> {update['global_batch_size']}, "
        f"lr {hp.lr:g} -> {update['lr']:g} (linear scaling rule from lr_per_device)"
    )
    log.warning("%s", note)
    return hp.model_copy(update=update), note


def _say(run: _Run, line: str) -> None:
    """A log line, printed once per host (local rank 0)."""
    if getattr(run.session, "local_rank", 0) == 0:
        print(line, flush=True)


def _shared(run: _Run) -> bool:
    """Whether all processes validate together (each its shard)."""
    return getattr(run.session, "ranks", 1) > 1


def _agree(run: _Run, save_due: bool = False) -> tuple[bool, bool]:
    """(stop, checkpoint now): with several processes, one decision for all, taken in a
    collective every process reaches at the same point. A signal lands at any moment, so
    the live flag (run.stop) may differ between processes; only the agreed answer decides
    whether they leave a loop, or they would wait for each other forever."""
    agree = getattr(run.session, "agree", None)
    return agree(run.stop, save_due) if agree else (bool(run.stop), save_due)


def _epochs(run: _Run, progress: Progress) -> None:
    """Train, validate, report and checkpoint each remaining epoch, until done or stopped."""
    while progress.epoch < run.hp.epochs:
        run.epoch_started = time.monotonic()
        _train_epoch(run, progress)
        if _agree(run)[0]:
            return
        val = None
        if run.session.is_first_host or _shared(run):
            val = _evaluate(run, "val", run.files.val_rec, run.files.val_idx, run.val_labels)
            if _agree(run)[0]:  # stopped during validation: it runs again after a restart
                return
        best = val is not None and progress.improves(val.accuracy)
        if val is not None:
            out = run.job.layout.output_data_dir
            val.save_predictions(out / PREDICTIONS_DIR / f"val-epoch-{progress.epoch:03d}.csv")
            if best:
                progress.best_epoch, progress.best_val_acc = progress.epoch, val.accuracy
                val.save_report(out, run.files.classes, progress.epoch)
        event = _epoch_event(run, progress, val)
        if run.session.is_first_host:  # SageMaker's metric regexes read every host's log
            _say(run, event.log_line())  # (the others' progress lines say they are alive)
        if getattr(run.session, "telemetry", None) is not None:
            _say(run, summary_line(event.epoch, event.model_dump()))
        if run.session.is_first_host:
            metrics.append(run.job.metrics_file, event)
        progress.next_epoch(event.model_dump())
        _save(run, progress, "epoch", best=best)


def _train_epoch(run: _Run, progress: Progress) -> None:
    """The remaining batches of ``progress.epoch``; throughput after the warm-up batches."""
    remaining = run.steps - progress.batch
    if remaining == 0:  # resumed with only validation left
        return
    watch = Stopwatch()
    warmup = min(run.hp.warmup_batches, max(remaining - 1, 0))
    log_every = int(os.environ.get(LOG_EVERY_ENV) or 50)
    last_print = time.monotonic()
    telemetry = getattr(run.session, "telemetry", None)
    run.session.begin_epoch(progress.epoch, progress.batch)
    run.tallied_step = progress.step
    if warmup == 0:
        watch.start()
    for done in range(1, remaining + 1):
        real = run.session.step(run.schedule.at_step(progress.step))
        progress.batch += 1
        progress.step += 1
        progress.samples += real
        if done == warmup:
            _tally(run, progress)
            watch.start()
            if telemetry is not None:
                telemetry.start_timing()
        elif done > warmup:
            progress.timed_samples += real
        # several processes sync the loss in a collective: they print on the same steps only
        due = not _shared(run) and time.monotonic() - last_print >= PROGRESS_EVERY_S
        if done % log_every == 0 or due:
            _print_progress(run, progress)
            last_print = time.monotonic()
        stop, save = _agree(run, time.monotonic() - run.last_save >= run.hp.checkpoint_interval_s)
        if stop:
            break
        if save:
            _tally(run, progress)
            watch.exclude(_save(run, progress, "interval"))
    _tally(run, progress)
    run.timed_here = watch.elapsed()
    progress.timed_seconds += run.timed_here


def _tally(run: _Run, progress: Progress) -> None:
    loss_sum, hits, seen = run.session.sync()
    if not math.isfinite(loss_sum):  # every later step would be NaN too: stop, as failed
        raise _diverged(run, progress, loss_sum)
    run.tallied_step = progress.step
    progress.loss_sum += loss_sum
    progress.hits += hits
    progress.seen += seen


def _diverged(run: _Run, p: Progress, loss: float) -> ConfigError:
    """The loss is summed between syncs (a sync per step would stall the device): name the
    step it was seen at and the steps it may have become non-finite in."""
    which = "NaN" if math.isnan(loss) else "infinite"
    since = (
        f" (summed over steps {run.tallied_step + 1}-{p.step})"
        if p.step > run.tallied_step + 1
        else ""
    )
    return ConfigError(
        f"the training loss became {which} at epoch {p.epoch} step {p.step}{since}, with "
        f"learning rate {run.schedule.at_step(max(p.step - 1, 0)):g}: training diverged",
        "lower the learning rate and launch again (optimizer.lr_per_gpu in the recipe, or "
        "lr=VALUE after the recipe's name on the command line).",
    )


def _evaluate(run: _Run, split: str, rec: Path, idx: Path, labels) -> Evaluation | None:
    """The split's evaluation (None if stopped, or on a process other than rank 0)."""
    hp = run.hp
    evaluator = None
    if labels is not None:
        evaluator = Evaluator(split, labels, hp.num_classes, max(hp.top_k, 1))
    if split == "val" and _shared(run):
        done = run.session.evaluate(split, evaluator, run.stop, shared=True)
    else:
        done = run.session.evaluate(split, evaluator, run.stop)
    return evaluator.result() if done and evaluator is not None else None


def _epoch_event(run: _Run, p: Progress, val: Evaluation | None) -> metrics.EpochMetrics:
    workers = run.session.workers
    rate = p.timed_samples / p.timed_seconds if p.timed_seconds > 0 else 0.0
    telemetry = getattr(run.session, "telemetry", None)
    extra = telemetry.epoch_fields(rate * workers, run.timed_here) if telemetry else {}
    return metrics.EpochMetrics(
        epoch=p.epoch,
        samples=p.samples * workers,
        samples_per_sec=rate * workers,
        epoch_seconds=p.seconds + time.monotonic() - run.epoch_started,
        train_loss=p.loss_sum / max(p.seen, 1),
        train_acc=p.hits / max(p.seen, 1),
        val_acc=val.accuracy if val else None,
        val_top_k=val.top_k_accuracy() if val and run.hp.top_k else None,
        val_count=val.count if val else None,
        best_epoch=p.best_epoch,
        lr=run.schedule.at_step(max(p.step - 1, 0)),
        devices=run.session.devices,
        hosts=workers,
        time=time.time(),
        **extra,
    )


def _save(run: _Run, progress: Progress, reason: str, best: bool = False) -> float:
    """Checkpoint now; returns the seconds it took (kept out of the throughput)."""
    started = time.monotonic()
    if not run.session.is_first_host:  # the workers' parameters are identical: one saves
        run.last_save = started
        return 0.0
    hp = run.hp
    state = progress.to_state()
    state["seconds"] = progress.seconds + (started - run.epoch_started if progress.batch else 0)
    state.update(model=hp.model, num_classes=hp.num_classes, reason=reason, saved_at=time.time())
    saved = run.checkpoints.save(run.session.write_checkpoint, state, best=best)
    run.last_save = time.monotonic()
    log.info(
        "checkpoint %s (%s%s): epoch %d batch %d step %d",
        saved.directory.name,
        reason,
        ", best" if best else "",
        progress.epoch,
        progress.batch,
        progress.step,
    )
    return run.last_save - started


def _finish(run: _Run, progress: Progress) -> tuple[Evaluation | None, bool]:
    """The best checkpoint's weights into the network, the test split once, the artifact;
    (the test's evaluation, False when a stop cut the test split short: no artifact)."""
    best = run.checkpoints.best()
    if best is not None and best.directory != _newest(run):
        run.session.load_weights(best)
    test = None
    files = run.files
    if files.test_rec is not None:
        labels = record_labels(files.test_rec, files.test_idx)
        test = _evaluate(run, "test", files.test_rec, files.test_idx, labels)
        if test is None and run.stop:
            return None, False
        if test is not None:
            out = run.job.layout.output_data_dir
            test.save_report(out, files.classes, progress.best_epoch)
            test.save_predictions(out / PREDICTIONS_DIR / "test.csv")
            _add_test_to_last_event(run, progress, test)
    _write_summary(run, progress, test)
    _write_artifact(run, progress)
    return test, True


def _newest(run: _Run) -> Path | None:
    latest = run.checkpoints.latest()
    return latest.directory if latest else None


def _add_test_to_last_event(run: _Run, progress: Progress, test: Evaluation) -> None:
    if progress.events:
        progress.events[-1]["test_acc"] = test.accuracy
        _rewrite_metrics(run.job, progress.events)
    print(
        f"finetune-test test_acc={test.accuracy:.6g} count={test.count} "
        f"best_epoch={progress.best_epoch}",
        flush=True,
    )


def _write_summary(run: _Run, progress: Progress, test: Evaluation | None) -> None:
    summary = {
        "best_epoch": progress.best_epoch,
        "best_val_acc": progress.best_val_acc,
        "test_acc": test.accuracy if test else None,
        "test_count": test.count if test else None,
        "epochs": len(progress.events),
    }
    out = run.job.layout.output_data_dir
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / SUMMARY_FILE, json.dumps(summary, indent=1) + "\n")


def _write_artifact(run: _Run, progress: Progress) -> None:
    """The model folder: engine files + classes, the preprocessing contract, the
    hyperparameters and which epoch the weights come from."""
    model_dir = run.job.layout.model_dir
    model_dir.mkdir(parents=True, exist_ok=True)
    run.session.export(model_dir)
    contract = preprocess.Preprocessing.from_hparams(run.hp)
    preprocess.save(contract, model_dir)
    classes_doc = {
        "classes": run.files.classes,
        "image_size": run.hp.image_size,
        "mean": list(run.hp.mean),
        "std": list(run.hp.std),
        "input": contract.layout,
        "best_epoch": progress.best_epoch,
        "best_val_acc": progress.best_val_acc,
    }
    write_atomic(model_dir / "classes.json", json.dumps(classes_doc, indent=2) + "\n")
    hp_text = json.dumps(run.hp.to_strings(), indent=2) + "\n"
    write_atomic(model_dir / "hyperparameters.json", hp_text)


def _write_record(run: _Run, note: str | None) -> None:
    """run-record.json: the launch-side record plus what only this machine knows."""
    record = launch_record(manifest_sha256(run.job.channels["train"]))
    record.update(run.session.environment())
    record["hyperparameters"] = run.hp.to_strings()
    record["rescaled"] = note
    record["preprocessing"] = preprocess.Preprocessing.from_hparams(run.hp).model_dump()
    out = run.job.layout.output_data_dir
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / RECORD_FILE, json.dumps(record, indent=1, default=str) + "\n")


def _print_progress(run: _Run, p: Progress) -> None:
    """One progress line (finetune.contracts.metrics.BatchProgress), the loss synced up to now."""
    _tally(run, p)
    seconds = p.seconds + time.monotonic() - run.epoch_started
    line = metrics.BatchProgress(
        epoch=p.epoch,
        batch=p.batch,
        steps=run.steps,
        step=p.step,
        lr=run.schedule.at_step(max(p.step - 1, 0)),
        train_loss=p.loss_sum / p.seen if p.seen else None,
        images=p.samples,
        seconds=seconds,
        images_per_sec=p.samples * run.session.workers / seconds if seconds > 0 else 0.0,
    )
    _say(run, line.log_line())


def _rewrite_metrics(job: TrainJob, events: list[dict]) -> None:
    """metrics.jsonl = the events the checkpoint knows: a restart after a crash between an
    epoch's event and its checkpoint must not leave that epoch in the file twice."""
    job.metrics_file.parent.mkdir(parents=True, exist_ok=True)
    lines = [metrics.EpochMetrics.model_validate(e).model_dump_json() + "\n" for e in events]
    write_atomic(job.metrics_file, "".join(lines))
