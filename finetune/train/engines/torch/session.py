"""The PyTorch engine's side of a run (finetune.train.fitloop.Session): device and precision,
a torchvision ResNet, SGD/Adam with a head group, and the resident or streaming data path.

Every random draw (epoch order, crops, flips) comes from generators seeded by the run's seed
and its position, so a run resumed from any checkpoint continues exactly as the
uninterrupted run would have (bit-identical on a CPU).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
from pathlib import Path

import torch
from torch import nn

from finetune.data.manifest import write_atomic
from finetune.errors import ConfigError, DataError
from finetune.train import dataset
from finetune.train.checkpoints import Checkpoint
from finetune.train.contract import TrainJob
from finetune.train.engines.models import check_model
from finetune.train.engines.torch import boxes, model, streaming, validation
from finetune.train.engines.torch import weights as wt
from finetune.train.engines.torch.resident import ImageStore
from finetune.train.evaluation import Evaluator
from finetune.train.preprocess import Preprocessing
from finetune.train.signals import StopRequest

WEIGHTS = "model.pt"
ENGINE_FILE = "engine.json"  # in the model folder: how this engine validated
OPTIMIZER = "optimizer.pt"
RESIDENT_SHARE = 0.5  # auto: resident when decoded images take at most this much memory

log = logging.getLogger(__name__)


class TorchSession:
    """One process, one device (many devices and hosts: DistributedDataParallel, next)."""

    def __init__(self, job: TrainJob, files: dataset.DatasetFiles) -> None:
        hp = job.hparams
        check_model("torch", hp.model)
        if len(job.hosts) > 1 or hp.hosts > 1:
            raise ConfigError(
                "the torch engine trains on one host so far; this job has "
                f"{max(len(job.hosts), hp.hosts)}",
                "run it on one instance (--count 1), or use engine=mxnet for several hosts.",
            )
        self.job, self.files = job, files
        self.device = _device(hp.device)
        _threads(self.device)
        self.devices, self.workers, self.is_first_host = 1, 1, True
        self.precision = _precision(hp.precision, self.device)
        self.contract = Preprocessing.from_hparams(hp)
        self.loaded: dict = {}

    # ---- building ---------------------------------------------------------------------
    def build(self, hp, steps: int, resume: Checkpoint | None) -> None:
        self.hp, self.steps = hp, steps
        model.initial_seed(hp.seed)
        found = None
        if hp.pretrained and resume is None:
            found = wt.locate(hp.model, hp.weights, self._search_dirs())
        net, self.loaded = model.build(hp, found)
        net = net.to(self.device, memory_format=torch.channels_last)
        self.net = net
        self.optimizer = _optimizer(model.param_groups(net, hp), hp, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        if resume is not None:
            self._resume(resume)
        self.forward = torch.compile(net) if hp.compile else net
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
        need = _decoded_bytes(self.files, self.contract)
        have = _memory(self.device)
        choice = "resident" if need <= RESIDENT_SHARE * have else "stream"
        log.info(
            "data path %s: decoded images ~%.2f GB, %s memory %.1f GB",
            choice,
            need / 1e9,
            self.device.type,
            have / 1e9,
        )
        return choice

    def _open_data(self) -> None:
        f = self.files
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
        b = self.hp.batch_size_per_device
        n = max(1, self.train_count // b)
        if self.train_count < b:  # smaller than one batch: repeat records to fill it
            order = order.repeat(b // self.train_count + 1)
        self._batches = [order[i * b : (i + 1) * b] for i in range(n)][: self.steps]
        self._epoch, self._position, self._stream = epoch, batch, None
        model.train_mode(self.net, self.hp.freeze_backbone)  # evaluate() leaves eval mode

    def step(self, lr: float) -> int:
        position = self._position
        x, y = self._batch(position)
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
        return n

    def _batch(self, position: int):
        index = self._batches[position]
        if self.path == "resident":
            g = boxes.generator(self.hp.seed, self._epoch, position)
            store = self.train_store
            dev_idx = index.to(self.device)
            w, h = store.widths[dev_idx].cpu(), store.heights[dev_idx].cpu()
            box = boxes.train(w, h, self.contract, g)
            flip = boxes.flips(len(index), self.contract, g)
            x = self._normalize(store.crops(dev_idx, box, self.contract.image_size, flip))
            y = store.labels[dev_idx]
            return x.contiguous(memory_format=torch.channels_last), y
        if self._stream is None:
            rest = [b.tolist() for b in self._batches[position:]]
            workers = _loader_workers(self.hp.loader_workers)
            pin = self.device.type == "cuda"
            loader = streaming.loader(self.train_data, rest, self._epoch, workers, pin)
            self._stream = iter(loader)
        x, y = next(self._stream)
        x = x.to(self.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        return x, y.to(self.device, non_blocking=True)

    def sync(self) -> tuple[float, int, int]:
        out = (float(self._loss.item()), int(self._hits.item()), self._seen)
        self._loss.zero_()
        self._hits.zero_()
        self._seen = 0
        return out

    # ---- evaluation -------------------------------------------------------------------
    def evaluate(self, split: str, evaluator: Evaluator, stop: StopRequest) -> bool:
        self.net.eval()
        with torch.no_grad(), self._autocast():
            for x, y in self._eval_batches(split):
                if stop:
                    return False
                scores = self.forward(x).float().cpu().numpy()
                evaluator.add(scores, y.cpu().numpy())
                if evaluator.done:
                    break
        return True

    def _eval_batches(self, split: str):
        f = self.files
        rec, idx = (f.val_rec, f.val_idx) if split == "val" else (f.test_rec, f.test_idx)
        if self.path == "resident":
            if split not in self._eval_stores:
                self._eval_stores[split] = ImageStore.load(rec, idx, self.contract, self.device)
            return validation.resident_batches(self._eval_stores[split], self.contract)
        workers = _loader_workers(self.hp.loader_workers)
        return validation.stream_batches(
            rec, idx, self.contract, self.device, workers, self.hp.seed
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
            "devices": 1,
            "hosts": 1,
            "precision": self.precision,
            "data_path": self.path,
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


def _device(kind: str) -> torch.device:
    if kind == "gpu" and not torch.cuda.is_available():
        raise ConfigError(
            "device=gpu but PyTorch sees no CUDA GPU on this host",
            "run on a GPU instance with a CUDA build of torch, or set device=cpu.",
        )
    if kind != "cpu" and torch.cuda.is_available():
        return torch.device("cuda", 0)
    return torch.device("cpu")


def _threads(device: torch.device) -> None:
    """Every core for intra-op work on a CPU (importing mxnet first would leave one)."""
    if device.type == "cpu":
        try:
            torch.set_num_threads(len(os.sched_getaffinity(0)))
        except AttributeError:
            torch.set_num_threads(os.cpu_count() or 1)


def _precision(asked: str, device: torch.device) -> str:
    """fp32 on a CPU (bf16 autocast is ~7x slower there); bf16 on GPUs that have it, else
    fp16 with a gradient scaler (T4, V100)."""
    if device.type != "cuda":
        if asked in ("bf16", "fp16"):
            log.warning("precision=%s asked on a CPU: training in fp32", asked)
        return "fp32"
    if asked != "auto":
        return asked
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


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


def _decoded_bytes(files: dataset.DatasetFiles, contract: Preprocessing) -> int:
    """Decoded size of every split at the contract's resize (4:3 images assumed)."""
    images = sum(s.count for s in files.manifest.splits.values())
    side = contract.resize_shorter
    return int(images * side * side * 4 / 3 * 3)


def _memory(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _loader_workers(asked: int) -> int:
    if asked >= 0:
        return asked
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
