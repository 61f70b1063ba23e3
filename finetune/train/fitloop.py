"""The epoch loop every engine shares, top to bottom: resume, epochs, validation, checkpoints,
the best model, the test split, the artifact. An engine contributes a Session and nothing
else; its ``group`` decides together when several processes train (docs/trainer.md: the
epoch loop)."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from finetune.contracts import metrics
from finetune.contracts.container import TrainJob
from finetune.contracts.engine import StopFlag
from finetune.contracts.hparams import TrainHyperparameters
from finetune.recipes.lr_scaling import LrSchedule, steps_per_epoch
from finetune.train import dataset, metriclog, outputs, startup
from finetune.train.checkpoints import CheckpointDir
from finetune.train.engine_api import Session
from finetune.train.evaluation import Evaluation, Evaluator, record_labels
from finetune.train.progress import Progress, Stopwatch
from finetune.train.rescale import rescale
from finetune.train.signals import StopRequest

LOG_EVERY_ENV = "FINETUNE_LOG_EVERY"  # batches between progress lines (default 50)
PROGRESS_EVERY_S = 2.0  # and at least this often: a terminal shows a live bar from them

log = logging.getLogger(__name__)


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
    stop: StopFlag
    hp: TrainHyperparameters
    val_labels: object = None
    epoch_started: float = 0.0
    timed_here: float = 0.0  # this process's steady-state seconds of the current epoch
    last_save: float = field(default_factory=time.monotonic)
    tallied_step: int = 0  # the step of the last loss sync (the NaN check's resolution)
    loggers: metriclog.Loggers = field(default_factory=metriclog.Loggers)  # optional copies

    @property
    def steps(self) -> int:
        return self.schedule.steps_per_epoch


def fit(job: TrainJob, session: Session, stop: StopFlag | None = None) -> FitResult:
    """Train ``job`` with an engine's ``session``, resuming from the newest checkpoint."""
    stop = StopRequest() if stop is None else stop  # (not `or`: an unset request is falsy)
    files = session.files
    hp, note = rescale(job.hparams, session.devices, session.hosts)
    checkpoints = CheckpointDir(job.checkpoint_dir, keep=hp.keep_checkpoints)
    resume = checkpoints.latest()
    if resume is not None:
        resume.check_fits(hp.model, hp.num_classes)
    steps = steps_per_epoch(files.train_count, hp.global_batch, hp.max_batches_per_epoch)
    session.build(hp, steps, resume)
    run = _Run(job, session, files, LrSchedule.from_hparams(hp, steps), checkpoints, stop, hp)
    if session.is_first_host:
        run.val_labels = record_labels(files.val_rec, files.val_idx)
        record = outputs.write_record(job, hp, session.environment(), note)
        if session.group.local_rank == 0:
            run.loggers = metriclog.start(job, hp, record)
    if note:
        _say(run, f"finetune-rescale {note}")
    progress = Progress.from_state(resume.state) if resume else Progress()
    progress.batch = min(progress.batch, steps)  # restarted on fewer devices
    if session.is_first_host:  # one metrics file and one checkpoint series per cluster
        outputs.rewrite_metrics(job, progress.events)
    if resume is not None:
        _say(
            run,
            f"finetune-resume checkpoint={resume.directory.name} epoch={progress.epoch} "
            f"batch={progress.batch} step={progress.step}",
        )
    elif checkpoints.skipped:  # a resume that cannot resume: said, not a silent fresh start
        _say(run, f"finetune-warning no checkpoint to resume from: every one in "
             f"{checkpoints.directory} is damaged or incomplete ({', '.join(checkpoints.skipped)}"
             "); training starts over from epoch 1")  # fmt: skip
    resumed = resume.directory.name if resume else None
    startup.setup_done()  # a trainer process: its start-up's objects frozen, collector on
    try:
        result = _train(run, progress, resumed)
    except BaseException:
        run.loggers.close("FAILED")
        raise
    run.loggers.close("KILLED" if result.stopped_by else "FINISHED")
    return result


def _train(run: _Run, progress: Progress, resumed: str | None) -> FitResult:
    """The remaining epochs, then the test split and the artifact unless stopped."""
    stop = run.stop
    _epochs(run, progress)
    if stop and stop.signal_name is not None:  # bool(stop) asks the request; then its name
        _save(run, progress, stop.signal_name)
        return FitResult(stop.signal_name, progress, resumed)
    test, done = _finish(run, progress) if run.session.is_first_host else (None, True)
    if not done:  # stopped while scoring the test split: no model yet; a restart scores it
        return FitResult(stop.signal_name, progress, resumed)
    return FitResult(None, progress, resumed, test)


def _say(run: _Run, line: str) -> None:
    """A log line, printed once per host (local rank 0)."""
    if run.session.group.local_rank == 0:
        print(line, flush=True)


def _shared(run: _Run) -> bool:
    """Whether all processes validate together (each its shard)."""
    return run.session.group.world > 1


def _agree(run: _Run, save_due: bool = False) -> tuple[bool, bool]:
    """(stop, checkpoint now): with several processes, one decision for all, taken in a
    collective every process reaches at the same point. A signal lands at any moment, so
    the live flag (run.stop) may differ between processes; only the agreed answer decides
    whether they leave a loop, or they would wait for each other forever."""
    return run.session.group.agree(run.stop, save_due)


def _epochs(run: _Run, progress: Progress) -> None:
    """Train, validate, report and checkpoint each remaining epoch, until done or stopped."""
    while progress.epoch < run.hp.epochs:
        run.epoch_started = time.monotonic()
        run.session.telemetry.begin_epoch()
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
            if best:
                progress.best_epoch, progress.best_val_acc = progress.epoch, val.accuracy
            outputs.save_validation(run.job, val, progress.epoch, best, run.files.classes)
        event = _epoch_event(run, progress, val)
        if run.session.is_first_host:  # SageMaker's metric regexes read every host's log
            _say(run, event.log_line())  # (the others' progress lines say they are alive)
        telemetry_line = run.session.telemetry.summary(event.epoch, event.model_dump())
        if telemetry_line is not None:
            _say(run, telemetry_line)
        if run.session.is_first_host:
            metrics.append(run.job.metrics_file, event)
        seconds = sum(e["epoch_seconds"] for e in progress.events) + event.epoch_seconds
        run.loggers.epoch(progress.step, event, metriclog.eur_so_far(run.hp, seconds))
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
    run.session.begin_epoch(progress.epoch, progress.batch)
    run.tallied_step = progress.step
    if warmup == 0:
        watch.start()
        run.session.telemetry.start_timing()
    for done in range(1, remaining + 1):
        real = run.session.step(run.schedule.at_step(progress.step))
        progress.batch += 1
        progress.step += 1
        progress.samples += real
        if done == warmup:
            _tally(run, progress)
            watch.start()
            run.session.telemetry.start_timing()
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
    run.session.telemetry.end_timing()  # (the GPU samples of the timed steps, not validation)
    run.timed_here = watch.elapsed()
    progress.timed_seconds += run.timed_here


def _tally(run: _Run, progress: Progress) -> None:
    loss_sum, hits, seen = run.session.sync()
    if not math.isfinite(loss_sum):  # every later step would be NaN too: stop, as failed
        lr = run.schedule.at_step(max(progress.step - 1, 0))
        raise progress.diverged(loss_sum, run.tallied_step, lr)
    run.tallied_step = progress.step
    progress.loss_sum += loss_sum
    progress.hits += hits
    progress.seen += seen


def _evaluate(run: _Run, split: str, rec: Path, idx: Path, labels) -> Evaluation | None:
    """The split's evaluation (None if stopped, or on a process other than rank 0)."""
    hp = run.hp
    evaluator = None
    if labels is not None:
        evaluator = Evaluator(split, labels, hp.num_classes, max(hp.top_k, 1))
    shared = split == "val" and _shared(run)
    done = run.session.evaluate(split, evaluator, run.stop, shared=shared)
    return evaluator.result() if done and evaluator is not None else None


def _epoch_event(run: _Run, p: Progress, val: Evaluation | None) -> metrics.EpochMetrics:
    hosts, lr = run.session.hosts, run.schedule.at_step(max(p.step - 1, 0))
    extra = run.session.telemetry.epoch_fields(p.rate * hosts, run.timed_here)
    return p.event(hosts=hosts, devices=run.session.devices, lr=lr, val=val, extra=extra,
                   epoch_started=run.epoch_started, top_k=run.hp.top_k)  # fmt: skip


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
    # for people: epochs counted from 1, as `runs show` counts them
    epoch = progress.epoch + 1
    log.info("checkpoint %s (%s%s): epoch %d batch %d step %d", saved.directory.name, reason,
             ", best" if best else "", epoch, progress.batch, progress.step)  # fmt: skip
    return run.last_save - started


def _finish(run: _Run, progress: Progress) -> tuple[Evaluation | None, bool]:
    """The best checkpoint's weights into the network, the test split once, the artifact;
    (the test's evaluation, False when a stop cut the test split short: no artifact)."""
    best, newest = run.checkpoints.best(), run.checkpoints.latest()
    if best is not None and best.directory != (newest.directory if newest else None):
        run.session.load_weights(best)
    test = None
    files = run.files
    if files.test_rec is not None and files.test_idx is not None:
        labels = record_labels(files.test_rec, files.test_idx)
        test = _evaluate(run, "test", files.test_rec, files.test_idx, labels)
        if test is None and run.stop:
            return None, False
        if test is not None:
            outputs.save_test(run.job, test, files.classes, progress)
            print(
                f"finetune-test test_acc={test.accuracy:.6g} count={test.count} "
                f"best_epoch={progress.best_epoch}",
                flush=True,
            )
    outputs.write_summary(run.job, progress, test)
    model_dir = run.job.layout.model_dir
    outputs.write_model(model_dir, run.session.export, run.hp, files.classes, progress)
    return test, True


def _print_progress(run: _Run, p: Progress) -> None:
    """One progress line (finetune.contracts.metrics.BatchProgress), the loss synced up to now."""
    _tally(run, p)
    lr = run.schedule.at_step(max(p.step - 1, 0))
    line = p.batch_progress(run.steps, lr, run.session.hosts, run.epoch_started)
    _say(run, line.log_line())
    run.loggers.step(p.step, line.train_loss, lr, line.images_per_sec)
