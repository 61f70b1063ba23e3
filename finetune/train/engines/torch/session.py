"""The PyTorch engine's side of a run (finetune.train.engine_api.Session): a torchvision network
on one device, or one process per device under torchrun with DistributedDataParallel. What
is decided once is decided in :meth:`TorchSession.build`; every random draw is seeded by the
run's seed and position, so a resumed run continues exactly (docs/trainer.md: the torch
session)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import torch

from finetune.contracts.container import TrainJob
from finetune.contracts.engine import StopFlag
from finetune.engines.models import check_model
from finetune.engines.torch import TorchOptions
from finetune.errors import ConfigError
from finetune.train import dataset
from finetune.train.checkpoints import Checkpoint
from finetune.train.engines.torch import (
    criterion,
    ddp,
    ema,
    files,
    flops,
    hardware,
    mixing,
    network,
    optim,
    precision,
    sharded,
)
from finetune.train.engines.torch import weights as wt
from finetune.train.engines.torch.batches import Batch, open_batches
from finetune.train.engines.torch.features import record
from finetune.train.engines.torch.telemetry import InputClock, open_telemetry
from finetune.train.evaluation import Evaluator
from finetune.train.preprocess import Preprocessing
from finetune.train.telemetry import Telemetry

log = logging.getLogger(__name__)
# images a compile repays (ResNet-50 bf16, H200): docs/decisions/007-torch-compile.md
COMPILE_BREAK_EVEN_IMAGES = 520_000


class TorchSession:
    """One process on one device; rank 0 alone validates the outputs it writes."""

    def __init__(self, job: TrainJob, files: dataset.DatasetFiles) -> None:
        hp = job.hparams
        check_model("torch", hp.model)
        self.job, self.files = job, files
        self.group = g = ddp.join(hardware.device_type(hp.device))
        if len(job.hosts) > 1 and g.world == 1:
            raise ConfigError(
                f"this job has {len(job.hosts)} hosts but this process was not started by "
                "torchrun (no RANK/WORLD_SIZE in its environment)",
                "start it with `python -m finetune.train` (it starts torchrun itself), or "
                "under torchrun with --nnodes equal to the hosts.",
            )
        self.device = hardware.device(hp.device, g.local_rank)
        hardware.threads(self.device, g.local_world)
        self.devices, self.hosts = g.local_world, g.hosts
        self.is_first_host, self.local_rank = g.rank == 0, g.local_rank
        self.precision = precision.choose(hp.precision, self.device)
        self.contract = Preprocessing.from_hparams(hp)
        self.loaded: dict = {}
        self._telemetry: Telemetry | None = None  # built with the network (it needs its FLOPs)

    @property
    def telemetry(self) -> Telemetry:
        """This process's telemetry, from :meth:`build` on."""
        if self._telemetry is None:
            raise RuntimeError("the torch session's telemetry is read before build()")
        return self._telemetry

    # ---- building ---------------------------------------------------------------------
    def build(self, hp, steps: int, resume: Checkpoint | None) -> None:
        self.hp, g = hp, self.group
        network.initial_seed(hp.seed)
        found = None
        if hp.pretrained and resume is None:
            found = network.find(hp, self._search_dirs())
        net, self.loaded = network.build(hp, found)
        if TorchOptions.of(hp).batchnorm == "sync" and g.world > 1:
            net = network.sync_batchnorm(net, self.device)
        # torch's stub of Module.to has no memory_format; the method takes it (torch docs)
        self.layout = layout = hardware.memory_format(self.device, self.precision, hp.model)
        self.net = net.to(self.device, memory_format=layout)  # type: ignore[call-overload]
        self.optimizer = optim.optimizer(optim.param_groups(self.net, hp), hp)
        self.scaler = precision.scaler(self.precision, self.device)
        if resume is not None:
            files.resume(resume, self.net, self.optimizer, self.scaler)
        self._check_same_start(resume)
        self._build_features(hp, resume)
        self.flops_per_image = flops.per_image(self.net, hp.image_size)
        self.steps = steps
        self.forward, self.eval_forward = self._forwards(hp)
        telemetry = open_telemetry(self.device, g, self.precision, self.flops_per_image)
        self._telemetry = telemetry
        self.data = open_batches(self.files, self.contract, self.device, hp, g, steps, layout)
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # static batch shapes: pick convs once
            if self.precision == "bf16":  # autocast would cast the first conv's input anyway
                self.data.input_dtype = torch.bfloat16
        self.clock = InputClock(self.device, telemetry, self.data.loader)
        self._loss = torch.zeros((), device=self.device, dtype=torch.float64)
        self._hits = torch.zeros((), device=self.device, dtype=torch.int64)
        self._seen = 0
        self._batches: Iterator[Batch] = iter(())

    def _forwards(self, hp):
        """(training forward, evaluation forward): DDP around the network when several
        processes train (it broadcasts rank 0's weights now and averages gradients),
        compiled when asked; evaluation runs the bare network, eager (DDP's forward may
        synchronise buffers, and a compiled one would recompile for eval mode and the short
        last batch: docs/decisions/007-torch-compile.md)."""
        images, compiled = hp.epochs * self.steps * hp.global_batch, TorchOptions.of(hp).compile
        if compiled and images < COMPILE_BREAK_EVEN_IMAGES:
            log.warning("train.compile=true for %d training images: compiling costs ~35-45 s "
                        "and repays itself after ~%d images (ResNet-50, H200); it may not "
                        "here", images, COMPILE_BREAK_EVEN_IMAGES)  # fmt: skip
        if compiled and self.device.type != "cuda":
            log.warning("train.compile=true on a CPU: compiling takes a while and CPU kernels "
                        "gain little (use it to test the GPU code path)")  # fmt: skip
        trained = self.net
        if self.group.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            trained = DistributedDataParallel(self.net, device_ids=ids)
        forward = torch.compile(trained, dynamic=False) if compiled else trained
        if self.ema is not None and hp.ema_evaluate:  # the average validates, never trains
            return forward, self.ema.module
        return forward, self.net

    def _build_features(self, hp, resume: Checkpoint | None) -> None:
        """The recipe features: the weights' average (after resuming the weights), the loss
        with its class weights, batch mixing."""
        self.ema = ema.from_hparams(self.net, hp)
        if self.ema is not None and resume is not None:
            self._resume_ema(resume)
        counts = self.files.manifest.splits["train"].per_class
        self.class_weights = criterion.class_weights(hp, counts)
        self.criterion = criterion.Criterion(hp.label_smoothing, self.class_weights, self.device)
        self.mixer = mixing.from_hparams(hp)

    def _resume_ema(self, resume: Checkpoint) -> None:
        average = self.ema
        if average is None:  # (only called with an average: _build_features)
            return
        path = resume.path(ema.EMA_FILE)
        if path.is_file():
            average.load(path)
        else:
            average.restart_from(self.net)

    def _search_dirs(self) -> list[Path]:
        channel = self.job.pretrained_dir
        return [*([channel] if channel else []), wt.hub_dir()]

    def _check_same_start(self, resume: Checkpoint | None) -> None:
        """Every process must resume from the same step (each reads its host's checkpoint
        folder: a host without the checkpoint would train other weights)."""
        step = float(resume.state.get("step", 0)) if resume is not None else -1.0
        if self.group.max(step) != -self.group.max(-step):
            raise ConfigError(
                "the training processes found different checkpoints to resume from",
                "give every host the same checkpoint folder (SageMaker copies checkpoint_s3_uri "
                "to every instance), or start with an empty one.",
            )

    # ---- training ---------------------------------------------------------------------
    def begin_epoch(self, epoch: int, batch: int = 0) -> None:
        """This epoch's batches from ``batch`` on (a resumed run starts where its
        checkpoint stood)."""
        self._batches = self.data.batches(epoch, batch)
        self._epoch, self._position = epoch, batch  # (mixing draws by position)
        # (evaluate() leaves eval mode)
        hp = self.hp
        network.train_mode(
            self.net, hp.freeze_backbone, TorchOptions.of(hp).batchnorm, network.heads(hp.model)
        )

    def step(self, lr: float) -> int:
        """One optimizer step at ``lr``; the images this host trained on."""
        with self.clock.waiting():
            x, y = next(self._batches)
        target = None
        if self.mixer is not None:  # soft targets for every batch (loss: one normalisation)
            x, target = self.mixer.apply(x, y, self._epoch, self._position)
        self._position += 1
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_mult"]
        with precision.autocast(self.precision, self.device):
            out = self.forward(x)
            loss = self.criterion(out, y, target)
        with precision.backward(self.precision, self.device):
            self.scaler.scale(loss).backward()  # (a disabled scaler passes the loss through)
        optim.clip(self.scaler, self.optimizer, self.hp.clip_grad_norm)  # (after unscaling)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update(self.net)
        n = y.shape[0]
        self._loss += loss.detach().to(torch.float64) * n
        # a mixed image counts as its larger share's class (torchvision's reference)
        truth = y if target is None else target.argmax(1)
        self._hits += (out.detach().argmax(1) == truth).sum()
        self._seen += n
        return n * self.group.local_world  # every process of this host trains as many

    def sync(self) -> tuple[float, int, int]:
        """(loss sum, hits, images) of every process since the last sync."""
        local = [float(self._loss.item()), float(self._hits.item()), float(self._seen)]
        self.clock.count()  # (the .item() above waited for the device)
        loss, hits, seen = self.group.sum(local)
        self._loss.zero_()
        self._hits.zero_()
        self._seen = 0
        return loss, int(hits), int(seen)

    # ---- evaluation -------------------------------------------------------------------
    def evaluate(
        self, split: str, evaluator: Evaluator | None, stop: StopFlag, shared: bool = False
    ) -> bool:
        """Every record of ``split`` into ``evaluator``; ``shared``: every process takes its
        shard and rank 0's evaluator gets them all (the others pass None)."""
        self.net.eval()
        with torch.no_grad(), precision.autocast(self.precision, self.device):
            if shared and self.group.world > 1:
                return sharded.evaluate(self, split, evaluator, stop)
            if evaluator is None:  # only the other ranks of a shared evaluation pass none
                raise ValueError(f"evaluating {split} alone needs an evaluator")
            for x, y in self.data.eval_batches(split):
                if stop:
                    return False
                scores = self.eval_forward(x).float().cpu().numpy()
                evaluator.add(scores, y.cpu().numpy())
                if evaluator.done:
                    break
        return True

    # ---- files ------------------------------------------------------------------------
    def write_checkpoint(self, folder: Path) -> None:
        files.write_checkpoint(folder, self.net, self.optimizer, self.scaler)
        if self.ema is not None:
            self.ema.save(folder)

    def load_weights(self, checkpoint: Checkpoint) -> None:
        files.load_weights(checkpoint, self.net)
        if self.ema is not None:
            self._resume_ema(checkpoint)

    def export(self, model_dir: Path) -> None:
        net, which = self.net, "trained"
        if self.ema is not None and self.hp.ema_evaluate:
            net, which = self.ema.module, "ema"
        files.export(model_dir, net, self.data.path, which)

    def environment(self) -> dict:
        return {**files.environment(self), **record(self)}

    def close(self) -> None:
        """End the loader workers and the telemetry thread, and leave the process group."""
        self._batches = iter(())
        if getattr(self, "data", None) is not None:
            self.data.close()
        if self._telemetry is not None:
            self._telemetry.close()
        self.group.close()
