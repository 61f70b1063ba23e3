"""The PyTorch engine's side of a run (finetune.train.protocol.Session): device and precision,
a torchvision ResNet, SGD/Adam with a head group, and the resident or streaming data path;
under torchrun one process per device, DistributedDataParallel (finetune.train.engines.torch.
ddp), each process training its slice of every global batch.

Every random draw (epoch order, crops, flips) comes from generators seeded by the run's seed
and its position -- drawn for the whole global batch, each process keeping its slice -- so a
run resumed from any checkpoint continues exactly as the uninterrupted run would have
(bit-identical on a CPU), and N processes see the images and crops one process would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import time
from pathlib import Path

import torch
from torch import nn

from finetune.catalog import gpu_peaks
from finetune.data.manifest import write_atomic
from finetune.errors import ConfigError, DataError
from finetune.train import dataset
from finetune.train.checkpoints import Checkpoint
from finetune.train.contract import TrainJob
from finetune.train.engines.models import check_model
from finetune.train.engines.torch import (
    boxes,
    ddp,
    flops,
    hardware,
    model,
    sharded,
    streaming,
    validation,
)
from finetune.train.engines.torch import weights as wt
from finetune.train.engines.torch.resident import ImageStore
from finetune.train.evaluation import Evaluator
from finetune.train.preprocess import Preprocessing
from finetune.train.signals import StopRequest
from finetune.train.telemetry import GpuSampler, Telemetry

WEIGHTS = "model.pt"
ENGINE_FILE = "engine.json"  # in the model folder: how this engine validated
OPTIMIZER = "optimizer.pt"
RESIDENT_SHARE = 0.5  # auto: resident when decoded images take at most this much memory

log = logging.getLogger(__name__)


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
        self.devices, self.hosts = g.local_world, g.nodes
        self.is_first_host, self.local_rank = g.rank == 0, g.local_rank
        self.precision = hardware.precision(hp.precision, self.device)
        self.contract = Preprocessing.from_hparams(hp)
        self.loaded: dict = {}

    # ---- building ---------------------------------------------------------------------
    def build(self, hp, steps: int, resume: Checkpoint | None) -> None:
        self.hp, self.steps = hp, steps
        g = self.group
        self.local_batch = ddp.local_batch(hp.global_batch_size, g.world)
        model.initial_seed(hp.seed)
        found = None
        if hp.pretrained and resume is None:
            found = wt.locate(hp.model, hp.weights, self._search_dirs())
        net, self.loaded = model.build(hp, found)
        if hp.batchnorm == "sync" and g.world > 1:
            net = model.sync_batchnorm(net, self.device)
        net = net.to(self.device, memory_format=torch.channels_last)
        self.net = net
        self.optimizer = _optimizer(model.param_groups(net, hp), hp, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        if resume is not None:
            self._resume(resume)
        self._check_same_start(resume)
        self.flops_per_image = flops.per_image(net, hp.image_size)
        trained = net
        if g.world > 1:  # DDP broadcasts rank 0's weights now and averages gradients
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            trained = DistributedDataParallel(net, device_ids=ids)
        self.forward = torch.compile(trained) if hp.compile else trained
        # evaluation runs the bare network: DDP's forward may synchronise buffers
        self.eval_forward = self.forward if g.world == 1 else (
            torch.compile(net) if hp.compile else net
        )  # fmt: skip
        self.telemetry = self._telemetry()
        self._waits: list = []
        self.path = self._choose_path(hp)
        self._open_data()
        self._loss = torch.zeros((), device=self.device, dtype=torch.float64)
        self._hits = torch.zeros((), device=self.device, dtype=torch.int64)
        self._seen = 0
        self._epoch, self._position = -1, 0
        self._batches: list = []
        self._stream = None

    def _search_dirs(self) -> list[Path]:
        channel = self.job.pretrained_dir
        return [*([channel] if channel else []), wt.hub_dir()]

    def _choose_path(self, hp) -> str:
        if hp.data_path != "auto":
            return hp.data_path
        need = hardware.decoded_bytes(self.files, self.contract)
        have = hardware.memory(self.device)
        choice = "resident" if need <= RESIDENT_SHARE * have else "stream"
        log.info(
            "data path %s: decoded images ~%.2f GB, %s memory %.1f GB",
            choice,
            need / 1e9,
            self.device.type,
            have / 1e9,
        )
        return choice

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

    def _telemetry(self) -> Telemetry:
        cuda = self.device.type == "cuda"
        name = torch.cuda.get_device_name(self.device) if cuda else None
        sampler = None
        if cuda and self.is_first_host:  # the GPUs of rank 0's host, one thread
            sampler = GpuSampler.open(hardware.nvml_ids(self.group.local_world))
        return Telemetry(
            precision=self.precision,
            gpus=self.group.world if cuda else 0,
            peak=gpu_peaks.lookup(name),
            flops_per_image=self.flops_per_image,
            sampler=sampler,
            reduce_max=self.group.max if self.group.world > 1 else None,
        )

    def _open_data(self) -> None:
        f = self.files
        if self.local_rank == 0:
            print(f"finetune-data path={self.path} device={self.device.type}", flush=True)
        if self.path == "resident":
            self.train_store = ImageStore.load(f.train_rec, f.train_idx, self.contract, self.device)
            self._eval_stores: dict[str, ImageStore] = {}
        else:
            self.train_data = streaming.RecordDataset(
                f.train_rec, f.train_idx, self.contract, True, self.hp.seed
            )
        self.train_count = f.train_count

    # ---- training ---------------------------------------------------------------------
    def begin_epoch(self, epoch: int, batch: int = 0) -> None:
        """This epoch's order (a permutation seeded by (seed, epoch), cut in full batches),
        from ``batch`` on (a resumed run starts where its checkpoint stood)."""
        g = boxes.generator(self.hp.seed, epoch)
        order = torch.randperm(self.train_count, generator=g)
        b = self.local_batch * self.group.world  # the global batch
        n = max(1, self.train_count // b)
        if self.train_count < b:  # smaller than one batch: repeat records to fill it
            order = order.repeat(b // self.train_count + 1)
        self._batches = [order[i * b : (i + 1) * b] for i in range(n)][: self.steps]
        self._epoch, self._position, self._stream = epoch, batch, None
        # (evaluate() leaves eval mode)
        model.train_mode(self.net, self.hp.freeze_backbone, self.hp.batchnorm)
        self.telemetry.begin_epoch()

    def step(self, lr: float) -> int:
        position = self._position
        started = self._clock()
        x, y = self._batch(position)
        self._waited(started)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group["lr_mult"]
        with self._autocast():
            out = self.forward(x)
            loss = nn.functional.cross_entropy(out, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        n = y.shape[0]
        self._loss += loss.detach().to(torch.float64) * n
        self._hits += (out.detach().argmax(1) == y).sum()
        self._seen += n
        self._position = position + 1
        return n * self.group.local_world  # every process of this host trains as many

    def _mine(self) -> slice:
        """This process's part of a global batch."""
        b = self.local_batch
        return slice(self.group.rank * b, (self.group.rank + 1) * b)

    def _batch(self, position: int):
        index = self._batches[position]
        mine = self._mine()
        if self.path == "resident":
            g = boxes.generator(self.hp.seed, self._epoch, position)
            store = self.train_store
            dev_idx = index.to(self.device)
            w, h = store.widths[dev_idx].cpu(), store.heights[dev_idx].cpu()
            box = boxes.train(w, h, self.contract, g)[mine]  # drawn for the global batch
            flip = boxes.flips(len(index), self.contract, g)[mine]
            dev_idx = dev_idx[mine]
            x = self._normalize(store.crops(dev_idx, box, self.contract.image_size, flip))
            y = store.labels[dev_idx]
            return x.contiguous(memory_format=torch.channels_last), y
        if self._stream is None:
            rest = [b[mine].tolist() for b in self._batches[position:]]
            workers = hardware.loader_workers(self.hp.loader_workers)
            pin = self.device.type == "cuda"
            loader = streaming.loader(self.train_data, rest, self._epoch, workers, pin)
            self._stream = iter(loader)
        x, y = next(self._stream)
        x = x.to(self.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        return x, y.to(self.device, non_blocking=True)

    def sync(self) -> tuple[float, int, int]:
        """(loss sum, hits, images) of every process since the last sync."""
        local = [float(self._loss.item()), float(self._hits.item()), float(self._seen)]
        self._count_waits()  # (the .item() above waited for the device)
        loss, hits, seen = self.group.sum(local)
        self._loss.zero_()
        self._hits.zero_()
        self._seen = 0
        return loss, int(hits), int(seen)

    # ---- input wait -------------------------------------------------------------------
    def _clock(self):
        """A mark before fetching a batch: CUDA events time the device's wait for it (a
        host clock would time kernel queueing instead), a host clock on a CPU."""
        if self.device.type == "cuda":
            mark = torch.cuda.Event(enable_timing=True)
            mark.record()
            return mark
        return time.perf_counter()

    def _waited(self, started) -> None:
        if self.device.type == "cuda":
            ready = torch.cuda.Event(enable_timing=True)
            ready.record()
            self._waits.append((started, ready))  # read at the next sync
        else:
            self.telemetry.add_wait(time.perf_counter() - started)

    def _count_waits(self) -> None:
        if self._waits:
            self._waits[-1][1].synchronize()
            for started, ready in self._waits:
                self.telemetry.add_wait(started.elapsed_time(ready) / 1000)
            self._waits.clear()

    # ---- evaluation -------------------------------------------------------------------
    def evaluate(
        self, split: str, evaluator: Evaluator | None, stop: StopRequest, shared: bool = False
    ) -> bool:
        """Every record of ``split`` into ``evaluator``; ``shared``: every process takes its
        shard and rank 0's evaluator gets them all (the others pass None)."""
        self.net.eval()
        with torch.no_grad(), self._autocast():
            if shared and self.group.world > 1:
                return sharded.evaluate(self, split, evaluator, stop)
            for x, y in self._eval_batches(split):
                if stop:
                    return False
                scores = self.eval_forward(x).float().cpu().numpy()
                evaluator.add(scores, y.cpu().numpy())
                if evaluator.done:
                    break
        return True

    def _eval_batches(self, split: str, records: list[int] | None = None):
        """(x, y) batches of ``records`` (default: every record, in file order)."""
        f = self.files
        rec, idx = (f.val_rec, f.val_idx) if split == "val" else (f.test_rec, f.test_idx)
        if self.path == "resident":
            if split not in self._eval_stores:
                self._eval_stores[split] = ImageStore.load(rec, idx, self.contract, self.device)
            return validation.resident_batches(self._eval_stores[split], self.contract, records)
        workers = hardware.loader_workers(self.hp.loader_workers)
        return validation.stream_batches(
            rec, idx, self.contract, self.device, workers, self.hp.seed, records
        )

    # ---- files ------------------------------------------------------------------------
    def write_checkpoint(self, folder: Path) -> None:
        torch.save(self.net.state_dict(), folder / WEIGHTS)
        extra = {"optimizer": self.optimizer.state_dict()}
        if self.scaler is not None:
            extra["scaler"] = self.scaler.state_dict()
        torch.save(extra, folder / OPTIMIZER)

    def load_weights(self, checkpoint: Checkpoint) -> None:
        self.net.load_state_dict(_load(checkpoint.path(WEIGHTS)))

    def _resume(self, checkpoint: Checkpoint) -> None:
        self.load_weights(checkpoint)
        extra = _load(checkpoint.path(OPTIMIZER))
        self.optimizer.load_state_dict(extra["optimizer"])
        if self.scaler is not None and "scaler" in extra:
            self.scaler.load_state_dict(extra["scaler"])
        log.info("resumed from %s", checkpoint.directory)

    def export(self, model_dir: Path) -> None:
        torch.save(self.net.state_dict(), model_dir / WEIGHTS)
        # prediction takes the validation path this run measured its accuracy with
        info = {"engine": "torch", "validation_path": self.path}
        write_atomic(model_dir / ENGINE_FILE, json.dumps(info, indent=1) + "\n")

    def environment(self) -> dict:
        import torchvision

        notes = []
        if self.device.type == "cuda":
            notes.append(
                "cuDNN picks convolution algorithms per run and some CUDA kernels add in "
                "arrival order: GPU runs are close but not bit-identical"
            )
        return {
            "engine": "torch",
            "framework": {"torch": torch.__version__, "torchvision": torchvision.__version__},
            "cuda": torch.version.cuda if self.device.type == "cuda" else None,
            "gpu": torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else None,
            "device_kind": "gpu" if self.device.type == "cuda" else "cpu",
            "devices": self.group.local_world,
            "hosts": self.group.nodes,
            "processes": self.group.world,
            "batchnorm": self.hp.batchnorm,
            "precision": self.precision,
            "data_path": self.path,
            "flops_per_image": self.flops_per_image,
            "gpu_peak": hardware.peak_record(self.telemetry),
            "pretrained": self.loaded or None,
            "machine": platform.machine(),
            "nondeterminism": notes,
        }

    # ---- helpers ----------------------------------------------------------------------
    def _normalize(self, pixels: torch.Tensor) -> torch.Tensor:
        return validation.normalize(pixels, self.contract)

    def _autocast(self):
        if self.precision in ("bf16", "fp16"):
            dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
            return torch.autocast(self.device.type, dtype=dtype)
        return contextlib.nullcontext()

    def close(self) -> None:
        """End the telemetry thread and leave the process group."""
        telemetry = getattr(self, "telemetry", None)
        if telemetry is not None:
            telemetry.close()
        self.group.close()


def _optimizer(groups: list[dict], hp, device: torch.device):
    """SGD (momentum, Nesterov for nag) or Adam; fused kernels on a GPU where available."""
    kwargs: dict = {"lr": hp.lr, "weight_decay": hp.wd}
    if device.type == "cuda":
        kwargs["fused"] = True
    if hp.optimizer in ("sgd", "nag"):
        kwargs.update(momentum=hp.momentum, nesterov=hp.optimizer == "nag")
        make = torch.optim.SGD
    else:
        make = torch.optim.Adam
    try:
        return make(groups, **kwargs)
    except (TypeError, RuntimeError):  # an older torch without the fused kernel
        kwargs.pop("fused", None)
        return make(groups, **kwargs)


def _load(path: Path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise DataError(
            f"checkpoint file {path} does not load ({type(exc).__name__})",
            "give this run an empty checkpoint folder, or resume it with its own files.",
        ) from None
