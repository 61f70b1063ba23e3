"""``key=value`` overrides on top of a recipe: ``epochs=2 optimizer.lr_per_device=0.002``.

Keys are dotted paths of the Recipe (``schedule.epochs``); a leaf name that occurs in one
section only may be given alone (``epochs``), and the usual short names work too: ``lr``,
``batch``, ``epochs`` and ``model`` (see ALIASES). Values are typed like YAML scalars (``2`` is an
int, ``0.002`` a float, ``true`` a bool, ``[4, 5]`` a list), except for text fields, which
keep the text as written (``model.name=1`` stays "1"). A renamed key (``train.batch_per_gpu``,
or ``batch_per_gpu`` alone) still works, with a note (finetune.recipes.renamed). Unknown keys
fail with a did-you-mean;
the values themselves are checked by the Recipe model after all overrides are applied.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import lru_cache

from finetune.errors import ConfigError, did_you_mean
from finetune.recipes import renamed, yamltext
from finetune.recipes.schema import Recipe, field_paths, section_type

# Short names people type from other tools' habits; each is one recipe key.
ALIASES = {
    "lr": "optimizer.lr_per_device",
    "batch": "train.batch_per_device",
    "batch_size": "train.batch_per_device",
    "epochs": "schedule.epochs",
    "model": "model.name",
    "seed": "train.seed",
}

_FIX = "write overrides as KEY=VALUE with a dotted key, e.g. `schedule.epochs=2`."


def parse_override(text: str) -> tuple[str, object]:
    """Split ``'optimizer.lr_per_device=0.002'`` into the full dotted key and its typed value."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not KEY=VALUE", _FIX)
    path = resolve_key(key)
    return path, _typed(path, raw.strip())


def resolve_key(key: str, paths: Sequence[str] | None = None) -> str:
    """The full dotted path for ``key``: itself, or the one path whose leaf it names
    (``paths``: the Recipe's dotted paths unless given)."""
    recipe_keys = paths is None  # the Recipe's own: its renamed keys still resolve
    paths = tuple(paths) if paths is not None else _paths()
    if key in paths:
        return key
    if key in ALIASES:
        return ALIASES[key]
    new = renamed.resolve(key) if recipe_keys else None
    if new is not None:
        return new
    sections = sorted({p.split(".")[0] for p in paths if "." in p})
    if key in sections:
        inside = ", ".join(p for p in paths if p.startswith(key + "."))
        raise ConfigError(f"override key {key!r} is a section, not a value", f"set one of {inside}")
    owners = [p for p in paths if p.rsplit(".", 1)[-1] == key]
    if len(owners) == 1:
        return owners[0]
    if len(owners) > 1:
        raise ConfigError(
            f"override key {key!r} is ambiguous: {', '.join(owners)}",
            "use the full dotted key.",
        )
    raise ConfigError(
        f"unknown override key {key!r}.{did_you_mean(key, _choices())}",
        f"use one of: {', '.join(paths)} (or a short name: {', '.join(ALIASES)}).",
    )


def apply_overrides(data: dict, overrides: Sequence[str]) -> dict:
    """A deep copy of the recipe mapping ``data`` with each ``KEY=VALUE`` set (last one wins)."""
    out = copy.deepcopy(data)
    given = set()
    for text in overrides:
        path, value = parse_override(text)
        given.add(path)
        node = out
        *parents, leaf = path.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {} if child is None else child
            node = child
        node[leaf] = value
    if "schedule.epochs" in given and "schedule.steps" not in given:
        _fit_steps(out)
    return out


def _fit_steps(data: dict) -> None:
    """A shorter run keeps the decay steps that still fall inside it (``epochs=1`` on a recipe
    with a step at epoch 1 trains at the base rate): the dry-run's schedule line shows it."""
    schedule = data.get("schedule")
    if not isinstance(schedule, dict):
        return
    epochs, steps = schedule.get("epochs"), schedule.get("steps")
    if isinstance(epochs, int | float) and isinstance(steps, list | tuple):
        schedule["steps"] = [s for s in steps if not isinstance(s, int | float) or s < epochs]


def _typed(path: str, raw: str) -> object:
    """YAML scalar typing, but text fields keep the text (YAML would make 'yes' a bool)."""
    import yaml

    kind = _text_fields().get(path)
    if kind == "text" or (kind == "optional-text" and raw not in ("", "null", "~")):
        return raw
    if raw == "":
        return None if kind == "optional-text" else ""
    try:
        return yamltext.load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"override {path}={raw!r}: not a YAML value ({str(exc).splitlines()[0]})",
            "quote text and write lists as [1, 2].",
        ) from None
    except yamltext.TooDeep:
        raise ConfigError(
            f"override {path}={raw[:40]!r}...: nested too deeply to be a recipe value",
            "write lists as [1, 2].",
        ) from None


@lru_cache(maxsize=1)
def _paths() -> tuple[str, ...]:
    return tuple(field_paths())


@lru_cache(maxsize=1)
def _choices() -> tuple[str, ...]:
    """Full paths plus the leaf names usable alone, for did-you-mean."""
    leaves = [p.rsplit(".", 1)[-1] for p in _paths()]
    unique = [leaf for leaf in leaves if leaves.count(leaf) == 1]
    return (*_paths(), *unique, *ALIASES)


@lru_cache(maxsize=1)
def _text_fields() -> dict[str, str]:
    """Dotted path -> 'text' (str) or 'optional-text' (str | None), for the str-typed leaves."""
    kinds: dict[str, str] = {}
    for section, field in Recipe.model_fields.items():
        sub = section_type(field.annotation)
        fields = sub.model_fields.items() if sub else [(None, field)]
        for name, f in fields:
            path = f"{section}.{name}" if name else section
            if f.annotation is str:
                kinds[path] = "text"
            elif f.annotation == (str | None):
                kinds[path] = "optional-text"
    return kinds
