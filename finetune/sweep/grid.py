"""The sweep's grid: ``--grid instance=g5.xlarge,g5.12xlarge --grid batch_per_device=16,32``.

Keys with a meaning of their own: ``instance`` (cloud backends: the instance type),
``count`` (instances per run), ``cpus`` (local backend: data-parallel CPU contexts),
``batch_per_device`` (train.batch_per_device), ``engine`` (mxnet | torch, with the model renamed to
the same ResNet of that engine). Any other key is a recipe override (``schedule.epochs=2,4``),
checked by the recipe loader like `launch`'s overrides.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass

from finetune.engines import registry
from finetune.errors import UsageError

RESOURCE_KEYS = ("instance", "count", "cpus")
SHORTHANDS = {"batch_per_device": "train.batch_per_device"}


@dataclass(frozen=True)
class Cell:
    """One point of the grid: its values (in grid order) and its identity in the ledger."""

    values: tuple[tuple[str, str], ...]
    key: str  # sha256 over recipe, dataset hash, engine, backend and the values

    def get(self, name: str, default: str | None = None) -> str | None:
        return dict(self.values).get(name, default)

    def label(self) -> str:
        """'instance=g5.xlarge batch_per_device=16'."""
        return " ".join(f"{k}={v}" for k, v in self.values)


def parse_grid(specs: list[str]) -> dict[str, list[str]]:
    """{key: [values]} from ``key=v1,v2`` strings, in the order given; a key given twice or an
    empty value list is a UsageError."""
    grid: dict[str, list[str]] = {}
    for spec in specs or ():
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not items:
            raise UsageError(
                f"--grid {spec!r} is not KEY=VALUE[,VALUE...]",
                "write e.g. --grid instance=g5.xlarge,g5.12xlarge --grid batch_per_device=16,32.",
            )
        if key in grid:
            raise UsageError(f"--grid names {key!r} twice", f"give all of {key}'s values once.")
        if len(set(items)) != len(items):
            raise UsageError(f"--grid {key} repeats a value", "give each value once.")
        grid[key] = items
    return grid


def cell_key(recipe: str, dataset_sha256: str, engine: str, backend: str, values) -> str:
    """The identity of a cell: the same recipe, dataset bytes, engine, backend and grid values
    are the same experiment, whichever sweep asks for it."""
    doc = {
        "recipe": recipe,
        "dataset_sha256": dataset_sha256,
        "engine": engine,
        "backend": backend,
        "values": sorted(values),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def expand(grid: dict[str, list[str]]) -> list[tuple[tuple[str, str], ...]]:
    """Every combination of the grid's values, first key slowest."""
    keys = list(grid)
    return [tuple(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def sweep_id(recipe: str, dataset_sha256: str, backend: str, grid, overrides) -> str:
    """'sw-' + 10 hex digits: the same command on the same data names the same sweep, so
    running it again resumes it."""
    doc = [recipe, dataset_sha256, backend, sorted(grid.items()), sorted(overrides)]
    return "sw-" + hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:10]


def recipe_overrides(values, recipe_engine: str, model: str) -> list[str]:
    """The recipe overrides a cell stands for (resource keys excluded)."""
    out = []
    for key, value in values:
        if key in RESOURCE_KEYS:
            continue
        if key == "engine":
            out.append(f"engine={value}")
            if value != recipe_engine:
                out.append(f"model.name={model_for_engine(model, value)}")
            continue
        out.append(f"{SHORTHANDS.get(key, key)}={value}")
    return out


def model_for_engine(model: str, engine: str) -> str:
    """The same ResNet under another engine: torchvision's 'resnet50' is ResNet v1.5, which
    GluonCV calls 'resnet50_v1b'; the other way round any GluonCV v1 variant maps to it."""
    m = re.fullmatch(r"resnet(\d+)(_v1b?|_v1[cd])?", model)
    if not m:
        return model  # not a ResNet we can rename: check_model explains what the engine has
    return registry.get(engine).resnet.format(depth=m.group(1))
