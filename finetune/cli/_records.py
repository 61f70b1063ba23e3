"""A record (a plan, a run, a manifest) as two-column CSV, its strings made inert by
report.text.rows_to_csv (textsafe.csv_cell: no escapes, no formulas)."""

from __future__ import annotations

import json

from finetune.report.text import rows_to_csv


def record_csv(record: dict) -> str:
    """A record as two-column CSV (key, value); nested keys joined by dots, lists as JSON."""

    def flat(d: dict, prefix: str = ""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            else:
                text = json.dumps(v, default=str) if isinstance(v, list) else v
                yield [f"{prefix}{k}", "" if text is None else text]

    return rows_to_csv(["key", "value"], list(flat(record)))
