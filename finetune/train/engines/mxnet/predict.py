"""A finished MXNet run's model folder, used: scores for images (packed as a .rec, read by
the same ImageRecordIter settings as the run's validation) and its export, the
symbol + params pair (MXNet 1.9.1's own ONNX exporter imports ``onnx.mapping``, which current
onnx releases removed, so ONNX is left to the torch engine).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np

from finetune.contracts.hparams import TrainHyperparameters
from finetune.errors import DataError
from finetune.train.engines.mxnet.artifact import PREFIX
from finetune.train.engines.mxnet.data import record_iter
from finetune.train.engines.mxnet.zoo import mxnet

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)

SYMBOL, PARAMS = f"{PREFIX}-symbol.json", f"{PREFIX}-0000.params"


def load_network(model_dir: Path, ctx):
    """The exported network (symbol + params) of ``model_dir`` on ``ctx``."""
    with warnings.catch_warnings():  # SymbolBlock warns about the untyped 'data' input
        warnings.simplefilter("ignore", UserWarning)
        try:
            return mx.gluon.SymbolBlock.imports(
                str(model_dir / SYMBOL), ["data"], str(model_dir / PARAMS), ctx=ctx
            )
        except (OSError, mx.base.MXNetError, AssertionError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DataError(
                f"the MXNet model in {model_dir} does not load: {first}",
                "use the model folder of a completed run (or download it again).",
            ) from None


def scores(model_dir: Path, rec: Path, idx: Path) -> np.ndarray:
    """(N, classes) scores of every record of ``rec``, in record order: the validation
    iterator with the run's batch (it repeats records to fill the last batch: cut here)."""
    hp = TrainHyperparameters.from_strings(
        json.loads((model_dir / "hyperparameters.json").read_text("utf-8"))
    )
    count = sum(1 for line in idx.read_text("ascii").splitlines() if line.strip())
    ctx = mx.cpu()
    net = load_network(model_dir, ctx)
    batch = hp.batch_per_device * hp.devices_per_host
    it = record_iter(rec, idx, hp, batch, train=False)
    out, seen = [], 0
    while seen < count:
        try:
            data = it.next().data[0].as_in_context(ctx)
        except StopIteration:
            break
        out.append(net(data).asnumpy()[: count - seen])
        seen += len(out[-1])
    if seen != count:
        raise DataError(f"read {seen} of {count} images", "report this: the reader ended early.")
    return np.concatenate(out) if out else np.zeros((0, hp.num_classes), np.float32)


def export(model_dir: Path, out: Path) -> list[str]:
    """The symbol + params pair into ``out`` (loadable with ``mx.gluon.SymbolBlock.imports``
    or ``mx.mod.Module``, input "data"); returns the files written."""
    load_network(model_dir, mx.cpu())  # refuse a folder that would not load
    for name in (SYMBOL, PARAMS):
        shutil.copyfile(model_dir / name, out / name)
    return [SYMBOL, PARAMS]
