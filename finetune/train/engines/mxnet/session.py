"""The MXNet engine's side of a run (finetune.train.engine_api.Session): devices, network,
gluon Trainer on a kvstore, and the ImageRecordIter loaders.

One process per host. Every step: split the batch over the devices, forward + backward, one
optimizer step (the kvstore sums the gradients of every device of every host).
"""

from __future__ import annotations

import logging
import platform
import random
from pathlib import Path

import numpy as np

from finetune.contracts.container import TrainJob
from finetune.contracts.engine import StopFlag
from finetune.errors import DataError
from finetune.train import dataset
from finetune.train.checkpoints import Checkpoint
from finetune.train.engine_api import OneProcess
from finetune.train.engines.mxnet import artifact, devices, network, optstate, weights
from finetune.train.engines.mxnet.data import preprocess_threads, record_iter
from finetune.train.engines.mxnet.tally import Tally
from finetune.train.engines.mxnet.zoo import mxnet
from finetune.train.evaluation import Evaluator
from finetune.train.telemetry import NoTelemetry

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)
autograd, gluon = mx.autograd, mx.gluon

PARAMS = "model.params"

log = logging.getLogger(__name__)


class MXNetSession:
    """Devices are chosen at construction (the loop rescales the plan to them); the network
    and loaders in :meth:`build`."""

    def __init__(self, job: TrainJob, files: dataset.DatasetFiles) -> None:
        self.job = job
        self.files = files
        network.check_name(job.hparams.model)
        _seed(job.hparams.seed)
        self.dev = devices.select(job.hparams)
        self.devices = len(self.dev.contexts)
        self.hosts = self.dev.hosts  # (one kvstore worker per host)
        self.is_first_host = job.is_first_host
        # one process per host, each deciding alone: the kvstore only sums gradients
        self.group = OneProcess()
        self.telemetry = NoTelemetry()
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.tally = Tally()

    # ---- building ---------------------------------------------------------------------
    def build(self, hp, steps: int, resume: Checkpoint | None) -> None:
        self.hp = hp
        self.net, self.trainer = self._network(resume)
        self.local_batch = hp.batch_per_device * self.devices
        self.train_iter = self._train_iter(0)
        self._iter_epoch = 0
        self._eval_iters: dict[str, object] = {}

    def _network(self, resume: Checkpoint | None):
        """The hybridized network and its gluon Trainer, from a checkpoint when resuming,
        else from the pretrained weights (or random ones)."""
        hp, contexts = self.hp, self.dev.contexts
        found = None
        if (hp.pretrained and resume is None) or hp.model in weights.SYMBOL_MODELS:
            found = weights.locate(
                hp.model,
                hp.weights,
                weights.search_dirs(self.job.pretrained_dir),
                hp.weights_sha256,
            )
        net = network.build(hp, contexts, found)
        if resume is not None:
            _load_params(net, resume, contexts)
        trainable = {k: p for k, p in net.collect_params().items() if p.grad_req != "null"}
        # on a dist kvstore the servers only sum gradients and every worker updates its own
        # copy: the learning-rate schedule and the trainer checkpoint stay on the worker
        kv = self.dev.kvstore
        local_update = False if kv is not None and "dist" in kv.type else None
        trainer = gluon.Trainer(
            trainable,
            hp.optimizer,
            _optimizer_params(hp),
            kvstore=kv,
            update_on_kvstore=local_update,
        )
        if resume is not None:  # after the parameters: the kvstore starts from their values
            optstate.load(trainer, resume.directory)  # never MXNet's load_states: it unpickles
        net.hybridize(static_alloc=True, static_shape=True)
        return net, trainer

    def _train_iter(self, epoch: int):
        parts = dict(num_parts=self.hosts, part_index=self.dev.rank)
        f = self.files
        return record_iter(f.train_rec, f.train_idx, self.hp, self.local_batch, True, **parts)

    # ---- training ---------------------------------------------------------------------
    def begin_epoch(self, epoch: int, batch: int = 0) -> None:
        # one reset per epoch: the iterator reshuffles from its seeded generator each time
        # (a resumed epoch starts a fresh shuffle: MXNet runs resume, but not bit-exactly)
        if epoch != self._iter_epoch:
            self.train_iter.reset()
            self._iter_epoch = epoch

    def step(self, lr: float) -> int:
        """One data-parallel step: every device gets a slice, the kvstore sums gradients."""
        batch = self._next_batch()
        self.trainer.set_learning_rate(lr)
        contexts = self.dev.contexts
        data = gluon.utils.split_and_load(batch.data[0], contexts)
        labels = gluon.utils.split_and_load(batch.label[0], contexts)
        with autograd.record():
            outputs = [self.net(x) for x in data]
            losses = [self.loss_fn(o, y) for o, y in zip(outputs, labels, strict=True)]
        autograd.backward(losses)
        # gradients are summed over every device of every host: normalise by the global batch
        self.trainer.step(batch.data[0].shape[0] * self.hosts)
        self.tally.add(losses, outputs, labels)
        return batch.data[0].shape[0]

    def _next_batch(self):
        """The next batch; a host whose share runs out first (hosts split the file by bytes)
        starts its share again, so every host makes the same number of steps."""
        try:
            return self.train_iter.next()
        except StopIteration:
            self.train_iter.reset()
            return self.train_iter.next()

    def sync(self) -> tuple[float, int, int]:
        return self.tally.sync()

    # ---- evaluation -------------------------------------------------------------------
    def evaluate(
        self, split: str, evaluator: Evaluator | None, stop: StopFlag, shared: bool = False
    ) -> bool:
        """Every batch of ``split`` into ``evaluator``, on this host alone (``shared`` is
        never asked: the group of an MXNet run is one process, the first host validates)."""
        if evaluator is None:  # only the other processes of a shared evaluation pass none
            raise ValueError(f"evaluating {split} alone needs an evaluator")
        it = self._eval_iter(split)
        it.reset()
        contexts = self.dev.contexts
        while not evaluator.done:
            if stop:
                return False
            try:
                batch = it.next()
            except StopIteration:
                break  # the evaluator reports a short split
            parts = gluon.utils.split_and_load(batch.data[0], contexts, even_split=False)
            outputs = [self.net(x) for x in parts]  # all devices at work before the wait
            scores = np.concatenate([o.asnumpy() for o in outputs])
            evaluator.add(scores, batch.label[0].asnumpy())
        return True

    def _eval_iter(self, split: str):
        if split not in self._eval_iters:
            f = self.files
            rec, idx = (f.val_rec, f.val_idx) if split == "val" else (f.test_rec, f.test_idx)
            if rec is None or idx is None:  # the caller evaluates a test split only if there is one
                raise DataError(f"the dataset has no {split} split",
                                "prepare it again with a test split (--test-ratio).")  # fmt: skip
            self._eval_iters[split] = record_iter(rec, idx, self.hp, self.local_batch, False)
        return self._eval_iters[split]

    # ---- files ------------------------------------------------------------------------
    def write_checkpoint(self, folder: Path) -> None:
        self.net.save_parameters(str(folder / PARAMS))
        optstate.save(self.trainer, folder)

    def load_weights(self, checkpoint: Checkpoint) -> None:
        _load_params(self.net, checkpoint, self.dev.contexts)

    def export(self, model_dir: Path) -> None:
        artifact.save_model(self.net, model_dir, self.hp, self.dev.contexts[0])

    def environment(self) -> dict:
        notes = []
        threads = preprocess_threads()
        if max(threads // 2 - 1, 1) > 1:
            notes.append(
                "ImageRecordIter decodes with several threads, each with its own augmentation "
                "random stream; which thread takes which image varies, so augmentations (and "
                "the weights) are not bit-reproducible"
            )
        if self.dev.kind == "gpu":
            notes.append("cuDNN may pick non-deterministic convolution algorithms on GPUs")
        if self.hosts > 1:
            notes.append("gradients of several hosts are summed in arrival order")
        return {
            "engine": "mxnet",
            "framework": {"mxnet": mx.__version__, "numpy": np.__version__},
            "cuda": _cuda_version(),
            "device_kind": self.dev.kind,
            "devices": self.devices,
            "hosts": self.hosts,
            "machine": platform.machine(),
            "nondeterminism": notes,
        }


def _load_params(net, checkpoint: Checkpoint, contexts: list) -> None:
    try:
        net.load_parameters(str(checkpoint.path(PARAMS)), ctx=contexts)
    except (AssertionError, mx.base.MXNetError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"the checkpoint {checkpoint.directory} does not fit this model: {first}",
            "give this run an empty checkpoint folder, or resume it with the dataset and model "
            "it was started with.",
        ) from None
    log.info("loaded %s", checkpoint.directory)


def _optimizer_params(hp) -> dict:
    params = {"learning_rate": hp.lr, "wd": hp.wd}
    if hp.optimizer in ("sgd", "nag"):
        params["momentum"] = hp.momentum
    return params


def _cuda_version() -> str | None:
    try:
        features = mx.runtime.Features()
        return "built with CUDA" if features.is_enabled("CUDA") else None
    except Exception:  # an old or unusual build: the record says nothing rather than fail
        return None


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)
