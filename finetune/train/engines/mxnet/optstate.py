"""The gluon Trainer's optimizer state, saved and loaded without pickle.

MXNet's own ``Trainer.save_states``/``load_states`` pickle the updater (its state NDArrays and
the optimizer object) and unpickle them on resume: a checkpoint that comes back from S3,
where other callers can write, would run code. Here the state NDArrays go through
``mx.nd.save``/``mx.nd.load`` (MXNet's binary array format: arrays only, no objects) and the
few scalars that move during training (update counts) go through JSON, into the optimizer the
session has just built from the run's hyperparameters. A resumed run continues exactly where
the saved one stood (tests/train/engines/mxnet/test_optimizer_state.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from finetune.errors import DataError
from finetune.train.engines.mxnet.zoo import mxnet

mx = mxnet()  # MXNet without scikit-learn's import (zoo.py)

ARRAYS = "optimizer.nd"  # the state NDArrays (momentum, Adam's mean and variance, ...)
SCALARS = "optimizer.json"  # the state's shape, update counts, the optimizer's class
FORMAT = 1

_FRESH = (
    "resume it with a checkpoint written by this version of finetune, or give this run an "
    "empty checkpoint folder (a new job) to start afresh."
)


def save(trainer, folder: Path) -> None:
    """Write ``trainer``'s optimizer state as ``ARRAYS`` and ``SCALARS`` in ``folder``."""
    updater, _ = _updaters(trainer)
    opt = updater.optimizer
    arrays: dict[str, Any] = {}  # name -> mx.nd.NDArray
    states = [
        {"key": k, "state": _encode(v, f"s{n}", arrays)}
        for n, (k, v) in enumerate(sorted(updater.states.items(), key=lambda kv: str(kv[0])))
    ]
    counts = opt._all_index_update_counts  # device id -> {param index: updates}
    current = next((d for d, c in counts.items() if c is opt._index_update_count), 0)
    scalars = {
        "format": FORMAT,
        "optimizer": type(opt).__name__,
        "num_update": opt.num_update,
        "begin_num_update": opt.begin_num_update,
        "counts": [[d, [[k, n] for k, n in c.items()]] for d, c in counts.items()],
        "current_device": current,
        "states": states,
    }
    # mx.nd.save refuses an empty dict: an optimizer without state (SGD without momentum)
    mx.nd.save(str(folder / ARRAYS), arrays or {"none": mx.nd.zeros(1)})
    (folder / SCALARS).write_text(json.dumps(scalars), encoding="utf-8")


def load(trainer, folder: Path) -> None:
    """Put the state saved in ``folder`` into ``trainer`` (built with the same optimizer
    and parameters); a checkpoint without it, or one that does not parse, is refused."""
    try:
        scalars = json.loads((folder / SCALARS).read_text("utf-8"))
        if scalars.get("format") != FORMAT:
            raise ValueError(f"unknown format {scalars.get('format')!r}")
    except FileNotFoundError:
        raise DataError(
            f"the checkpoint {folder} has no {SCALARS}: it was written by an older finetune, "
            "whose pickled optimizer state is never loaded (unpickling runs code)",
            _FRESH,
        ) from None
    except (OSError, ValueError) as exc:
        raise DataError(
            f"the checkpoint {folder} has an unreadable {SCALARS}: {exc}", _FRESH
        ) from None
    updaters, opt = _updaters(trainer)[1], trainer._optimizer
    if scalars["optimizer"] != type(opt).__name__:
        raise DataError(
            f"the checkpoint {folder} holds {scalars['optimizer']} state, this run uses "
            f"{type(opt).__name__}",
            _FRESH,
        )
    for updater in updaters:
        arrays = _load_arrays(folder)  # each updater its own copies (one per device)
        try:
            updater.states = {s["key"]: _decode(s["state"], arrays) for s in scalars["states"]}
        except (KeyError, TypeError) as exc:
            raise DataError(
                f"the checkpoint {folder}'s optimizer state is torn: {exc}", _FRESH
            ) from None
        updater.states_synced = dict.fromkeys(updater.states, False)  # moved on first use
    opt.num_update = int(scalars["num_update"])
    opt.begin_num_update = int(scalars["begin_num_update"])
    opt._all_index_update_counts = {d: dict(_keyed(c)) for d, c in scalars["counts"]}
    opt._set_current_context(scalars["current_device"])


def _updaters(trainer):
    """(the updater whose state is saved, every updater to load into), as MXNet's own
    save_states/load_states pick them: the kvstore's when it updates, else one per device."""
    # the same preparation MXNet's Trainer.save_states/load_states do first
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    if trainer._params_to_init:
        trainer._init_params()
    if trainer._update_on_kvstore:
        updater = trainer._kvstore._updater
        return updater, [updater]
    return trainer._updaters[0], trainer._updaters


def _encode(state, name: str, arrays: dict):
    if state is None:
        return None
    if isinstance(state, mx.nd.NDArray):
        arrays[name] = state
        return {"nd": name}
    if isinstance(state, tuple | list):
        kind = "tuple" if isinstance(state, tuple) else "list"
        return {kind: [_encode(s, f"{name}.{i}", arrays) for i, s in enumerate(state)]}
    raise TypeError(f"optimizer state of type {type(state).__name__} is not supported")


def _decode(state, arrays: dict):
    if state is None:
        return None
    if "nd" in state:
        return arrays[state["nd"]]
    if "tuple" in state:
        return tuple(_decode(s, arrays) for s in state["tuple"])
    return [_decode(s, arrays) for s in state["list"]]


def _keyed(pairs):
    return ((k, int(n)) for k, n in pairs)


def _load_arrays(folder: Path) -> dict:
    try:
        arrays = mx.nd.load(str(folder / ARRAYS))
    except mx.base.MXNetError as exc:
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        first = lines[-1].split(": ", 1)[-1] if lines else "unreadable"  # MXNet's last line
        raise DataError(
            f"the checkpoint {folder}'s {ARRAYS} is unreadable: {first}", _FRESH
        ) from None
    if not isinstance(arrays, dict):
        raise DataError(f"the checkpoint {folder}'s {ARRAYS} holds no named arrays", _FRESH)
    return arrays
