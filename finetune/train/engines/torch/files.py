"""The torch engine's files: a checkpoint (weights, optimizer and gradient-scaler state), the
exported model (weights and engine.json, which says how the run validated, for `finetune
predict`), and the run record's environment fields."""

from __future__ import annotations

import json
import logging
import platform
from pathlib import Path

import torch

from finetune.engines.torch import TORCH, TorchOptions
from finetune.errors import DataError
from finetune.files import write_atomic
from finetune.train.checkpoints import Checkpoint
from finetune.train.engines.torch import hardware

WEIGHTS = TORCH.weights_file  # the model folder's weights, named by the spec
ENGINE_FILE = "engine.json"  # in the model folder: how this engine validated
OPTIMIZER = "optimizer.pt"

log = logging.getLogger(__name__)


def write_checkpoint(folder: Path, net, optimizer, scaler) -> None:
    """Weights into WEIGHTS; optimizer and scaler state (empty when disabled) into OPTIMIZER."""
    torch.save(net.state_dict(), folder / WEIGHTS)
    torch.save({"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()},
               folder / OPTIMIZER)  # fmt: skip


def load_weights(checkpoint: Checkpoint, net) -> None:
    net.load_state_dict(load(checkpoint.path(WEIGHTS)))


def resume(checkpoint: Checkpoint, net, optimizer, scaler) -> None:
    """Weights, optimizer and (when it has state in both) scaler state of a checkpoint."""
    load_weights(checkpoint, net)
    extra = load(checkpoint.path(OPTIMIZER))
    optimizer.load_state_dict(extra["optimizer"])
    if scaler.is_enabled() and extra.get("scaler"):
        scaler.load_state_dict(extra["scaler"])
    log.info("resumed from %s", checkpoint.directory)


def export(model_dir: Path, net, data_path: str, weights: str = "trained") -> None:
    """The artifact's weights (``weights``: "trained", or "ema" for the weights' average)
    and engine.json."""
    torch.save(net.state_dict(), model_dir / WEIGHTS)
    # prediction takes the validation path this run measured its accuracy with
    info = {"engine": "torch", "validation_path": data_path, "weights": weights}
    write_atomic(model_dir / ENGINE_FILE, json.dumps(info, indent=1) + "\n")


def environment(s) -> dict:
    """The run record's engine fields of TorchSession ``s`` (passed in, not imported: the
    session uses this module): versions, devices, precision, memory layout
    (hardware.memory_format), data path, peak."""
    import torchvision

    cuda = s.device.type == "cuda"
    notes = []
    if cuda:
        notes.append(
            "cuDNN picks convolution algorithms per run and some CUDA kernels add in "
            "arrival order: GPU runs are close but not bit-identical"
        )
    return {
        "engine": "torch",
        "framework": {"torch": torch.__version__, "torchvision": torchvision.__version__},
        "cuda": torch.version.cuda if cuda else None,
        "gpu": torch.cuda.get_device_name(s.device) if cuda else None,
        "device_kind": "gpu" if cuda else "cpu",
        "devices": s.group.local_world,
        "hosts": s.group.hosts,
        "processes": s.group.world,
        "batchnorm": TorchOptions.of(s.hp).batchnorm,
        "precision": s.precision,
        "layout": "channels_last" if s.layout == torch.channels_last else "nchw",
        "data_path": s.data.path,
        "flops_per_image": s.flops_per_image,
        "gpu_peak": hardware.peak_record(s.telemetry),
        "pretrained": s.loaded or None,
        "machine": platform.machine(),
        "nondeterminism": notes,
    }


def load(path: Path):
    """A torch file of ours (tensors only), or a DataError naming it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise DataError(
            f"checkpoint file {path} does not load ({type(exc).__name__})",
            "give this run an empty checkpoint folder, or resume it with its own files.",
        ) from None
