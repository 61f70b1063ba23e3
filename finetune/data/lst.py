"""im2rec's .lst format: ``index<TAB>label<TAB>relative/path``, one image a line."""

from __future__ import annotations

from pathlib import Path

from finetune.errors import DataError


def format_line(index: int, label: float, path: str) -> str:
    """One .lst line, formatted as im2rec.py writes it (label as %f)."""
    if "\t" in path or "\n" in path:
        raise DataError(f"image path {path!r} contains a tab or newline", "rename the file.")
    return f"{index}\t{label:f}\t{path}\n"


def read(path: str | Path) -> list[tuple[int, float, str]]:
    """Parse a .lst into (index, label, path) triples."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                raise DataError(
                    f"{path}:{lineno}: expected index, label and path separated by tabs"
                )
            rows.append((int(parts[0]), float(parts[1]), parts[-1]))
    return rows
