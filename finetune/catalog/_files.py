"""Where catalog data lives (bundled package data, user cache) and how it is read and written."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from importlib import resources
from pathlib import Path

from finetune.errors import DataError


def bundled_text(name: str) -> str:
    """The text of a CSV shipped inside the package (finetune/catalog/NAME)."""
    return resources.files("finetune.catalog").joinpath(name).read_text(encoding="utf-8")


def read_rows(text: str, header: tuple[str, ...], origin: str) -> list[dict[str, str]]:
    """CSV rows as dicts, after checking the header names every column we need."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [h for h in header if h not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            f"{origin} is not a catalog CSV: columns {', '.join(missing)} are missing "
            f"(found {reader.fieldnames}).",
            "delete the file (it is a cache) and run `finetune prices refresh`.",
        )
    return list(reader)


def rows_to_csv(header, rows) -> str:
    """CSV text with a header line; values are written as they come (str() of each): data
    files read back by read_rows. Output for people: report.text.rows_to_csv (made inert)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never half.

    The temporary file sits in the same folder: os.replace is atomic only within a filesystem.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
