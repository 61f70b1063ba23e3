"""A finished torch run's model folder, used: scores for images (packed as a .rec, read
through the very validation path the run was measured with) and an ONNX export.

The folder holds ``model.pt`` (the network's state_dict), ``hyperparameters.json``,
``preprocessing.json``, ``classes.json`` and ``engine.json`` (which validation path the run
used; runs older than that file used the resident one unless it says otherwise).
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import torch

from finetune.contracts.hparams import TrainHyperparameters
from finetune.errors import DataError
from finetune.train import preprocess
from finetune.train.engines.torch import validation
from finetune.train.engines.torch.files import ENGINE_FILE, WEIGHTS
from finetune.train.engines.torch.hardware import memory_format
from finetune.train.engines.torch.network import construct
from finetune.train.engines.torch.resident import ImageStore

ONNX_FILE = "model.onnx"
INPUT, OUTPUT = "data", "scores"
log = logging.getLogger(__name__)


def load_network(
    model_dir: Path, device: torch.device, hp: TrainHyperparameters | None = None
) -> torch.nn.Module:
    """The trained network of ``model_dir`` (its hyperparameters ``hp``, read when not given)
    in eval mode on ``device``."""
    hp = hp or _hparams(model_dir)
    net = construct(hp.model, hp.num_classes, hp.image_size)
    try:
        state = torch.load(model_dir / WEIGHTS, map_location="cpu", weights_only=True)
        net.load_state_dict(state)
    except Exception as exc:  # a torn download, another model's file
        raise DataError(
            f"{model_dir / WEIGHTS} does not load as {hp.model} ({type(exc).__name__})",
            "use the model folder of a completed run (or download it again).",
        ) from None
    # torch's stub of Module.to has no memory_format; the method takes it (torch docs)
    layout = memory_format(device, model=hp.model)  # the layout the run validated in
    return net.to(device, memory_format=layout).eval()  # type: ignore[call-overload]


def scores(model_dir: Path, rec: Path, idx: Path) -> np.ndarray:
    """(N, classes) scores of every record of ``rec``, in record order."""
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    hp = _hparams(model_dir)
    net = load_network(model_dir, device, hp)
    contract = preprocess.load(model_dir)
    layout = memory_format(device, model=hp.model)  # validation's, and the network's
    if _validation_path(model_dir) == "stream":
        batches = validation.stream_batches(rec, idx, contract, device, 0, 0, layout=layout)
    else:
        store = ImageStore.load(rec, idx, contract, device)
        batches = validation.resident_batches(store, contract, layout=layout)
    out = []
    with torch.no_grad():
        for x, _ in batches:
            out.append(net(x).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, hp.num_classes), np.float32)


def export(model_dir: Path, out: Path) -> list[str]:
    """``model.onnx`` into ``out`` (input "data": N x 3 x S x S float32, the preprocessing
    contract's tensor; output "scores": N x classes); returns the files written."""
    net = load_network(model_dir, torch.device("cpu"))
    size = preprocess.load(model_dir).image_size
    example = torch.zeros(2, 3, size, size)
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings():  # the exporter warns about its own internals
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net.to(memory_format=torch.contiguous_format),
            (example,),
            str(out / ONNX_FILE),
            dynamo=True,
            input_names=[INPUT],
            output_names=[OUTPUT],
            dynamic_shapes={"x": {0: batch}},
            external_data=False,  # one self-contained file (a ResNet-152 is ~240 MB)
            verbose=False,
        )
    return [ONNX_FILE]


def _hparams(model_dir: Path) -> TrainHyperparameters:
    raw = json.loads((model_dir / "hyperparameters.json").read_text("utf-8"))
    return TrainHyperparameters.from_strings(raw)


def _validation_path(model_dir: Path) -> str:
    try:
        return json.loads((model_dir / ENGINE_FILE).read_text("utf-8"))["validation_path"]
    except (OSError, ValueError, KeyError):
        return "resident"
