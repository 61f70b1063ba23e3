"""Counts for a network the bundled table (traffic.py) lacks, such as a timm model: its
engine's runtime counts one training step on the meta device (shapes only: no weights,
nothing fetched), and the row is kept in <FINETUNE_CACHE_DIR>/perf/counted.csv (the bundled
table's columns) so the next plan reads it."""

from __future__ import annotations

import logging
from pathlib import Path

from finetune import settings
from finetune.catalog._files import atomic_write, rows_to_csv
from finetune.contracts.engine import runtime
from finetune.engines.descriptor import Engine
from finetune.estimate.perf import gpus, traffic

FILE = "counted.csv"

log = logging.getLogger(__name__)


def path() -> Path:
    """Where counted rows are kept: <FINETUNE_CACHE_DIR>/perf/counted.csv."""
    return settings.get().cache_dir / "perf" / FILE


def lookup(engine: Engine, model: str, image_size: int, precision: str) -> traffic.Traffic | None:
    """The counts of ``model`` at ``image_size`` in ``precision``'s class: kept from an earlier
    count, else counted now; None where the engine cannot build it on the meta device."""
    cls = gpus.precision_class(precision)
    kept = _kept().get((model, image_size, cls))
    if kept is not None:
        return kept
    try:
        row = runtime(engine.name).count_step(model, image_size, cls)
    except Exception as exc:  # an op the meta device cannot run: no estimate, never a failure
        log.warning("could not count %s on the meta device (%s: %s)", model,
                    type(exc).__name__, exc)  # fmt: skip
        return None
    if row is None:
        return None
    text = path().read_text("utf-8") if path().is_file() else rows_to_csv(traffic.HEADER, [])
    atomic_write(path(), text + rows_to_csv(traffic.HEADER, [row]).split("\n", 1)[1])
    return _kept()[(model, image_size, cls)]


def _kept() -> dict[tuple[str, int, str], traffic.Traffic]:
    """Every row counted here before (the file is small: one row per network and size)."""
    if not path().is_file():
        return {}
    return traffic.parse(path().read_text("utf-8"), str(path()))
