"""The fit loop, top to bottom: devices, data, model, optimizer, resume, epochs, artifact.

One process per host. Every batch: split over the devices, forward + backward, one
optimizer step at the scheduled learning rate; a checkpoint every ``checkpoint_interval_s``
seconds and after every epoch; after every epoch a validation pass and one metrics event
(metrics.jsonl + a log line). SIGTERM finishes the batch, checkpoints and returns.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, field

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from finetune import metrics
from finetune.data.manifest import write_atomic
from finetune.recipes.scaling import LrSchedule, steps_per_epoch
from finetune.train import dataset
from finetune.train.contract import TrainJob
from finetune.train.engines.mxnet import artifact, devices, model, weights
from finetune.train.engines.mxnet.checkpoint import Checkpoint, CheckpointDir
from finetune.train.engines.mxnet.data import record_iter
from finetune.train.engines.mxnet.tally import Progress, Stopwatch, Tally
from finetune.train.signals import StopRequest

LOG_EVERY_ENV = "FINETUNE_LOG_EVERY"  # batches between progress lines (default 50)

log = logging.getLogger(__name__)


@dataclass
class FitResult:
    stopped_by: str | None  # signal name when a stop request ended the run early
    progress: Progress
    resumed_from: str | None = None


@dataclass
class Run:
    """What the loop works with, built once by :func:`fit`."""

    job: TrainJob
    dev: devices.Devices
    net: object
    trainer: gluon.Trainer
    train_iter: object
    val_iter: object
    schedule: LrSchedule
    checkpoints: CheckpointDir
    stop: StopRequest
    loss_fn: object = field(default_factory=gluon.loss.SoftmaxCrossEntropyLoss)
    epoch_started: float = 0.0
    last_save: float = field(default_factory=time.monotonic)

    @property
    def steps(self) -> int:
        return self.schedule.steps_per_epoch


def fit(job: TrainJob, stop: StopRequest | None = None) -> FitResult:
    """Train as ``job`` says, resuming from its newest checkpoint; returns where it stopped.
    ``stop`` is checked after every batch (the entrypoint installs it for SIGTERM)."""
    stop = StopRequest() if stop is None else stop  # (not `or`: an unset request is falsy)
    hp = job.hparams
    model.check_name(hp.model)
    files = dataset.resolve(job.channels["train"], job.channels["validation"], hp)
    _seed(hp.seed)
    dev = devices.select(hp)
    checkpoints = CheckpointDir(job.checkpoint_dir)
    resume = checkpoints.latest()
    if resume is not None:
        resume.check_fits(hp.model, hp.num_classes)
    net, trainer = _network(job, dev, resume)
    train_iter, val_iter, schedule = _data(job, files, dev)

    progress = Progress.from_state(resume.state) if resume else Progress()
    progress.batch = min(progress.batch, schedule.steps_per_epoch)  # restarted on fewer devices
    if job.is_first_host:  # one metrics file and one checkpoint series per cluster
        _rewrite_metrics(job, progress.events)
    if resume is not None:
        print(
            f"finetune-resume checkpoint={resume.directory.name} epoch={progress.epoch} "
            f"batch={progress.batch} step={progress.step}",
            flush=True,
        )
    run = Run(job, dev, net, trainer, train_iter, val_iter, schedule, checkpoints, stop)
    _epochs(run, progress)
    if stop:
        _save(run, progress, stop.signal_name)
        return FitResult(stop.signal_name, progress, _name(resume))
    if job.is_first_host:
        artifact.save_model(net, job.layout.model_dir, files.classes, hp, dev.contexts[0])
    return FitResult(None, progress, _name(resume))


def _network(job: TrainJob, dev: devices.Devices, resume: Checkpoint | None):
    """The hybridized network and its gluon Trainer, from a checkpoint when resuming, else
    from the pretrained weights (or random ones)."""
    hp = job.hparams
    found = None
    if (hp.pretrained and resume is None) or hp.model in weights.SYMBOL_MODELS:
        found = weights.locate(hp.model, hp.weights, weights.search_dirs(job.pretrained_dir))
    net = model.build(hp, dev.contexts, found)
    if resume is not None:
        resume.load_into(net, dev.contexts)
    trainable = {k: p for k, p in net.collect_params().items() if p.grad_req != "null"}
    # on a dist kvstore the servers only sum gradients and every worker updates its own copy:
    # the learning-rate schedule and the trainer checkpoint stay on the worker
    local_update = False if dev.kvstore is not None and "dist" in dev.kvstore.type else None
    trainer = gluon.Trainer(
        trainable,
        hp.optimizer,
        _optimizer_params(hp),
        kvstore=dev.kvstore,
        update_on_kvstore=local_update,
    )
    if resume is not None:  # after the parameters: the kvstore starts from their values
        trainer.load_states(str(resume.trainer_states))
    net.hybridize(static_alloc=True, static_shape=True)
    return net, trainer


def _data(job: TrainJob, files: dataset.DatasetFiles, dev: devices.Devices):
    """This host's share of both splits, a batch of batch_size_per_device for each device,
    and the learning-rate schedule over the resulting steps per epoch."""
    hp = job.hparams
    local_batch = hp.batch_size_per_device * len(dev.contexts)
    parts = dict(num_parts=dev.num_workers, part_index=dev.rank)
    train_iter = record_iter(files.train_rec, files.train_idx, hp, local_batch, True, **parts)
    val_iter = record_iter(files.val_rec, files.val_idx, hp, local_batch, False, **parts)
    global_batch = local_batch * dev.num_workers
    steps = steps_per_epoch(files.train_count, global_batch, hp.max_batches_per_epoch)
    return train_iter, val_iter, LrSchedule.from_hparams(hp, steps)


def _epochs(run: Run, progress: Progress) -> None:
    """Train, validate, report and checkpoint each remaining epoch, until done or stopped."""
    hp = run.job.hparams
    while progress.epoch < hp.epochs:
        run.epoch_started = time.monotonic()
        _train_epoch(run, progress)
        if run.stop:
            return
        accuracy = _evaluate(run)
        if accuracy is None:  # stopped during validation: it runs again after a restart
            return
        event = _epoch_event(run, progress, *accuracy)
        print(event.log_line(), flush=True)
        if run.job.is_first_host:
            metrics.append(run.job.metrics_file, event)
        progress.next_epoch(event.model_dump())
        _save(run, progress, "epoch")


def _train_epoch(run: Run, progress: Progress) -> None:
    """The remaining batches of ``progress.epoch``; throughput after the warm-up batches."""
    hp = run.job.hparams
    tally, watch = Tally(progress), Stopwatch()
    remaining = run.steps - progress.batch
    if remaining == 0:  # resumed with only validation left
        return
    warmup = min(hp.warmup_batches, max(remaining - 1, 0))
    log_every = int(os.environ.get(LOG_EVERY_ENV) or 50)
    if warmup == 0:
        watch.start()
    run.train_iter.reset()
    for done in range(1, remaining + 1):
        batch = _next_batch(run.train_iter)
        run.trainer.set_learning_rate(run.schedule.at_step(progress.step))
        outputs, losses, labels = _step(run, batch)
        tally.add(losses, outputs, labels)
        real = batch.data[0].shape[0] - batch.pad
        progress.batch += 1
        progress.step += 1
        progress.samples += real
        if done == warmup:
            tally.sync()
            watch.start()
        elif done > warmup:
            progress.timed_samples += real
        if done % log_every == 0:
            _print_progress(run, progress)
        if run.stop:
            break
        if time.monotonic() - run.last_save >= hp.checkpoint_interval_s:
            tally.sync()
            watch.exclude(_save(run, progress, "interval"))
    tally.sync()
    progress.timed_seconds += watch.elapsed()


def _step(run: Run, batch):
    """One data-parallel step: every device gets a slice, the kvstore sums the gradients."""
    contexts = run.dev.contexts
    data = gluon.utils.split_and_load(batch.data[0], contexts)
    labels = gluon.utils.split_and_load(batch.label[0], contexts)
    with autograd.record():
        outputs = [run.net(x) for x in data]
        losses = [run.loss_fn(out, y) for out, y in zip(outputs, labels, strict=True)]
    autograd.backward(losses)
    # gradients are summed over every device of every host: normalise by the global batch
    run.trainer.step(batch.data[0].shape[0] * run.dev.num_workers)
    return outputs, losses, labels


def _next_batch(it):
    """The next batch; after the last one, start over (ImageRecordIter may yield a batch
    fewer after reset(), and the lr schedule counts on exactly `steps` batches an epoch)."""
    try:
        return it.next()
    except StopIteration:
        it.reset()
        return it.next()


def _evaluate(run: Run) -> tuple[float, float | None] | None:
    """Top-1 and top-k accuracy on this host's validation share (None: stop requested)."""
    k = min(run.job.hparams.top_k, run.job.hparams.num_classes)
    hits1 = hitsk = total = 0
    run.val_iter.reset()
    for batch in run.val_iter:
        if run.stop:
            return None
        real = batch.data[0].shape[0] - batch.pad
        parts = gluon.utils.split_and_load(batch.data[0], run.dev.contexts)
        outputs = [run.net(x) for x in parts]  # all devices at work before the first wait
        scores = np.concatenate([out.asnumpy() for out in outputs])[:real]
        labels = batch.label[0].asnumpy()[:real].astype(int)
        top = np.argsort(-scores, axis=1)[:, : max(k, 1)]
        hits1 += int((top[:, 0] == labels).sum())
        hitsk += int((top == labels[:, None]).any(axis=1).sum())
        total += real
    if total == 0:
        return 0.0, None
    return hits1 / total, (hitsk / total if k else None)


def _epoch_event(run: Run, p: Progress, val_acc: float, val_top_k) -> metrics.EpochMetrics:
    workers = run.dev.num_workers
    rate = p.timed_samples / p.timed_seconds if p.timed_seconds > 0 else 0.0
    return metrics.EpochMetrics(
        epoch=p.epoch,
        samples=p.samples * workers,
        samples_per_sec=rate * workers,
        epoch_seconds=p.seconds + time.monotonic() - run.epoch_started,
        train_loss=p.loss_sum / max(p.seen, 1),
        train_acc=p.hits / max(p.seen, 1),
        val_acc=val_acc,
        val_top_k=val_top_k,
        lr=run.schedule.at_step(max(p.step - 1, 0)),
        devices=len(run.dev.contexts),
        hosts=workers,
        time=time.time(),
    )


def _save(run: Run, progress: Progress, reason: str) -> float:
    """Checkpoint now; returns the seconds it took (kept out of the throughput)."""
    started = time.monotonic()
    if not run.job.is_first_host:  # the workers' parameters are identical: one host saves
        run.last_save = started
        return 0.0
    hp = run.job.hparams
    state = progress.to_state()
    state["seconds"] = progress.seconds + (started - run.epoch_started if progress.batch else 0)
    state.update(model=hp.model, num_classes=hp.num_classes, reason=reason, saved_at=time.time())
    saved = run.checkpoints.save(run.net, run.trainer, state)
    run.last_save = time.monotonic()
    log.info(
        "checkpoint %s (%s): epoch %d batch %d step %d",
        saved.directory.name,
        reason,
        progress.epoch,
        progress.batch,
        progress.step,
    )
    return run.last_save - started


def _print_progress(run: Run, p: Progress) -> None:
    loss = p.loss_sum / p.seen if p.seen else float("nan")
    lr = run.schedule.at_step(max(p.step - 1, 0))
    print(
        f"finetune-progress epoch={p.epoch} batch={p.batch}/{run.steps} step={p.step} "
        f"lr={lr:.6g} train_loss={loss:.4f}",
        flush=True,
    )


def _optimizer_params(hp) -> dict:
    params = {"learning_rate": hp.lr, "wd": hp.wd}
    if hp.optimizer in ("sgd", "nag"):
        params["momentum"] = hp.momentum
    return params


def _rewrite_metrics(job: TrainJob, events: list[dict]) -> None:
    """metrics.jsonl = the events the checkpoint knows: a restart after a crash between an
    epoch's event and its checkpoint must not leave that epoch in the file twice."""
    job.metrics_file.parent.mkdir(parents=True, exist_ok=True)
    lines = [metrics.EpochMetrics.model_validate(e).model_dump_json() + "\n" for e in events]
    write_atomic(job.metrics_file, "".join(lines))


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)


def _name(resume: Checkpoint | None) -> str | None:
    return resume.directory.name if resume else None
