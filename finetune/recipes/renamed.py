"""Recipe keys that were renamed, still read under their old names (one word per idea).

A recipe states per-device values: ``train.batch_per_device`` and ``optimizer.lr_per_device``
(``*_per_gpu`` in older versions; a CPU context is a device too). The old keys keep working:

- in YAML files and ``key=value`` overrides (what a person wrote): read as the new key, with one
  deprecation note on stderr naming the new key (:func:`upgrade`, :func:`resolve`);
- in recipes stored with a run (the plan in the ledger, plan.json in S3): read silently as the
  new key (the Recipe model's ``_renamed_keys``), so old runs still read; new ones are written
  with the new names.
"""

from __future__ import annotations

import sys

from finetune.errors import ConfigError

# old dotted path -> new dotted path (the section stays the same)
RENAMED = {
    "train.batch_per_gpu": "train.batch_per_device",
    "optimizer.lr_per_gpu": "optimizer.lr_per_device",
}
# an old leaf name given alone (``batch_per_gpu=16``) -> its new dotted path
OLD_LEAVES = {old.rsplit(".", 1)[1]: new for old, new in RENAMED.items()}

_NOTED: set[str] = set()  # one note per old key and process, however often it is read


def renamed_in_section(section: str, values: object) -> object:
    """``values`` of recipe section ``section`` with old keys under their new names (a copy;
    the same object when nothing was renamed). Both names at once is left for the model to
    reject as an unknown key."""
    if not isinstance(values, dict):
        return values
    out = dict(values)
    for old, new in RENAMED.items():
        old_section, old_leaf = old.split(".")
        new_leaf = new.split(".")[1]
        if old_section == section and old_leaf in out and new_leaf not in out:
            out[new_leaf] = out.pop(old_leaf)
    return out


def upgrade(data: dict, source: str) -> dict:
    """A recipe mapping read from ``source`` with old keys renamed, a note for each; a key
    given under both names is a ConfigError (which one was meant?)."""
    out = dict(data)
    for old, new in RENAMED.items():
        section, old_leaf = old.split(".")
        values = out.get(section)
        if not isinstance(values, dict) or old_leaf not in values:
            continue
        new_leaf = new.split(".")[1]
        if new_leaf in values:
            raise ConfigError(
                f"{source}: {old} and {new} are the same key (renamed), given twice",
                f"keep {new} only.",
            )
        note(old, new, source)
        out[section] = renamed_in_section(section, values)
    return out


def resolve(key: str) -> str | None:
    """The new dotted path for an old override key (full path or leaf name), noted; else None."""
    new = RENAMED.get(key) or OLD_LEAVES.get(key)
    if new is not None:
        note(key, new, "an override")
    return new


def note(old: str, new: str, where: str) -> None:
    """The deprecation note, once per old key: on stderr, never an error."""
    if old in _NOTED:
        return
    _NOTED.add(old)
    section, _, leaf = new.rpartition(".")
    # an override names the whole path; a recipe file the key under its section
    write = new if where == "an override" else f"{leaf} under {section}:"
    print(
        f"Note: recipe key {old} (in {where}) is deprecated and read as {new}. "
        f"To fix: write {write} instead; the old name will go in a later release.",
        file=sys.stderr,
    )
