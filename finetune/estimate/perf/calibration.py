"""Calibration rows (finetune/catalog/calibration.csv): measured training throughputs with
their sources.

Each row is one published or measured figure: network, image size, GPU (gpu_peaks.csv's
name), devices per host and hosts, precision, batch per device, framework, data pipeline,
``Kind`` and the images/s of all devices together. Kinds: ``record`` (tuned submissions:
MLPerf), ``reference`` (vendor-tuned or synthetic-data benchmarks: NVIDIA's
DeepLearningExamples with DALI, the MXNet FAQ, timm's benchmark script), ``plain`` (a plain
training loop on real data, as finetune's own engine is). The model predicts one kind class
from rows of that class; records bound a plain prediction from above.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from finetune.catalog._files import bundled_text, read_rows
from finetune.errors import DataError

FILE = "calibration.csv"
HEADER = ("Id", "Network", "ImageSize", "GpuModel", "GpusPerHost", "Hosts", "Precision",
          "BatchPerDevice", "Framework", "Pipeline", "Kind", "ImagesPerSec", "Source",
          "SourceRef", "AsOf", "Notes")  # fmt: skip
KINDS = ("record", "reference", "plain")
TUNED = ("record", "reference")


@dataclass(frozen=True)
class Row:
    """One calibration figure and the setup it was measured in."""

    id: str
    network: str
    image_size: int
    gpu_model: str
    gpus_per_host: int
    hosts: int
    precision: str
    batch_per_device: int
    framework: str
    pipeline: str
    kind: str
    images_per_sec: float  # all devices together
    source: str
    source_ref: str
    as_of: str
    notes: str = ""

    @property
    def layout(self) -> str:
        """channels_last where the row's id or notes say NHWC (timm's nhwc CSV, DLE's AMP and
        MLPerf runs), else contiguous (NCHW: PyTorch's and MXNet's default)."""
        said = f"{self.id} {self.notes}".lower()
        return "channels_last" if "nhwc" in said else "contiguous"

    @property
    def devices(self) -> int:
        return self.gpus_per_host * self.hosts

    @property
    def tuned(self) -> bool:
        return self.kind in TUNED

    def cite(self) -> str:
        return f"{self.id} ({self.source}, {self.as_of})"


@functools.cache
def rows() -> tuple[Row, ...]:
    """Every calibration row, in file order (DataError for a malformed one)."""
    return tuple(_parse(r) for r in read_rows(bundled_text(FILE), HEADER, FILE))


def _parse(r: dict[str, str]) -> Row:
    try:
        row = Row(
            r["Id"], r["Network"], int(r["ImageSize"]), r["GpuModel"], int(r["GpusPerHost"]),
            int(r["Hosts"]), r["Precision"], int(r["BatchPerDevice"] or 0), r["Framework"],
            r["Pipeline"], r["Kind"], float(r["ImagesPerSec"]), r["Source"], r["SourceRef"],
            r["AsOf"], r["Notes"],
        )  # fmt: skip
    except ValueError as exc:
        raise DataError(
            f"{FILE} row {r.get('Id')!r} is malformed ({exc})",
            "fix the row: counts are whole numbers, ImagesPerSec a number.",
        ) from None
    if row.kind not in KINDS:
        raise DataError(f"{FILE} row {row.id!r}: Kind {row.kind!r}", f"use one of {KINDS}.")
    return row
