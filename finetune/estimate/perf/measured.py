"""Measured rows (finetune/catalog/measured.csv): what `bash scripts/gpu-check.sh` measured on
a real GPU, preferred on that GPU over anything learned from published rows (the engine's
job on the resident path, else the plain loop, at the setup's compile, layout and precision
class, the batch within 2x). Imported with ``python -m finetune.estimate.perf.measured
CHECK.json [--csv PATH]``."""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from finetune.catalog._files import bundled_text, read_rows
from finetune.errors import DataError
from finetune.estimate.perf import flops, gpus

if TYPE_CHECKING:
    from finetune.estimate.perf.setup import Setup

FILE = "measured.csv"
HEADER = ("Id", "Network", "ImageSize", "GpuModel", "Precision", "BatchPerDevice", "Layout",
          "Compile", "Kind", "DataPath", "ImagesPerSec", "InputWait", "Torch", "Cuda", "Date",
          "Source")  # fmt: skip
# the framework every row ran (its version is the Torch column): rows predict an engine on it
FRAMEWORK = "torch"
# the same GPU: run-to-run noise (~1 %), torch versions and a batch up to 2x apart (b256 ->
# b512 was +3 % compiled on the H200)
MARGIN_SAME_GPU = 0.10


@dataclass(frozen=True)
class Row:
    id: str
    network: str
    image_size: int
    gpu_model: str
    precision: str
    batch: int
    layout: str  # channels_last | contiguous
    compile: str  # eager | inductor
    kind: str  # engine | plain
    data_path: str  # resident | stream | "" (plain)
    images_per_sec: float
    input_wait: float | None
    torch: str
    cuda: str
    date: str
    source: str

    def cite(self) -> str:
        return (f"{self.id}: {self.images_per_sec:,.0f} img/s measured {self.date} on "
                f"{self.gpu_model} (torch {self.torch}, CUDA {self.cuda}, "
                f"{self.source})")  # fmt: skip


@functools.cache
def rows() -> tuple[Row, ...]:
    """Every measured row (bundled CSV), in file order."""
    return tuple(_parse(r) for r in read_rows(bundled_text(FILE), HEADER, FILE))


def _parse(r: dict[str, str]) -> Row:
    try:
        return Row(
            r["Id"], r["Network"], int(r["ImageSize"]), r["GpuModel"], r["Precision"],
            int(r["BatchPerDevice"]), r["Layout"], r["Compile"], r["Kind"], r["DataPath"],
            float(r["ImagesPerSec"]), float(r["InputWait"]) if r["InputWait"] else None,
            r["Torch"], r["Cuda"], r["Date"], r["Source"],
        )  # fmt: skip
    except ValueError as exc:
        raise DataError(f"{FILE} row {r.get('Id')!r} is malformed ({exc})",
                        "fix the row, or import the gpu-check JSON again.") from None  # fmt: skip


def predict(
    setup: Setup, exclude: frozenset[str] = frozenset()
) -> tuple[float, float, float, list[str]] | None:
    """(per-device images/s, low, high, basis lines) for a torch ``setup`` measured on this
    very GPU; None when no row fits (another GPU takes the roofline, fitted to these rows
    too: throughput.py)."""
    if FRAMEWORK not in setup.engine.frameworks:
        return None
    net, want = flops.network_key(setup.network), "inductor" if setup.compile else "eager"
    mine = gpus.peak(setup.gpu_model)
    fit = [r for r in rows() if r.id not in exclude and flops.network_key(r.network) == net
           and gpus.precision_class(r.precision) == gpus.precision_class(setup.precision)
           and r.image_size == setup.image_size
           and r.layout == setup.layout and r.compile == want
           and r.kind in ("engine", "plain") and r.data_path in ("resident", "")
           and mine is not None and gpus.peak(r.gpu_model) == mine
           and abs(math.log(r.batch / setup.batch_per_device)) <= math.log(2)]  # fmt: skip
    if not fit:
        return None
    rate, used = _best(fit)
    basis = [f"measured: {used.cite()}"]
    return rate, rate * (1 - MARGIN_SAME_GPU), rate * (1 + MARGIN_SAME_GPU), basis


def _best(found: list[Row]) -> tuple[float, Row]:
    """The engine's own rows first, then plain loops; the newest date among them."""
    kind = "engine" if any(r.kind == "engine" for r in found) else "plain"
    newest = max(r.date for r in found if r.kind == kind)
    chosen = [r for r in found if r.kind == kind and r.date == newest]
    return statistics.median(r.images_per_sec for r in chosen), chosen[0]


def from_check(report: dict[str, Any]) -> list[dict[str, Any]]:
    """A gpu-check JSON -> measured rows (as CSV dicts): its engine jobs and the plain
    torchvision loop of its throughput steps (the reference checked against it; a
    throughput step from before that check existed is left out). A --cpu-dry
    report has no GPU figures: DataError."""
    if report.get("mode") != "gpu":
        raise DataError("this gpu-check report ran without a GPU (--cpu-dry): nothing measured",
                        "import the JSON of a run on a GPU machine.")  # fmt: skip
    steps, sizes = report["steps"], report["sizes"]
    env = steps["environment"]
    date = report["started"][:10]
    common = {"ImageSize": sizes["image_size"], "GpuModel": env["catalog_gpu"],
              "Precision": sizes["precision"], "Layout": "channels_last", "Torch": env["torch"],
              "Cuda": env["cuda"], "Date": date,
              "Source": f"finetune gpu-check {report['started']}"}  # fmt: skip
    out = []
    for name, step in steps.items():
        if step.get("status") != "ok":
            continue
        comp = "inductor" if step.get("compile") else "eager"
        slug = f"gpucheck-{date.replace('-', '')}-{env['catalog_gpu']}".lower().replace(" ", "-")
        if name.startswith("engine "):
            out.append({**common, "Id": f"{slug}-{step['model']}-engine-{step['data_path']}-{comp}",
                        "Network": step["model"], "BatchPerDevice": sizes["batch"],
                        "Compile": comp, "Kind": "engine", "DataPath": step["data_path"],
                        "ImagesPerSec": round(step["samples_per_sec"], 1),
                        "InputWait": _round(step.get("input_wait_fraction"))})  # fmt: skip
        elif name.startswith("throughput ") and step.get("plain_images_per_s"):
            out.append({**common, "Id": f"{slug}-{step['model']}-plain-{comp}",
                        "Network": step["model"], "BatchPerDevice": step["batch"],
                        "Compile": comp, "Kind": "plain", "DataPath": "",
                        "ImagesPerSec": round(step["plain_images_per_s"], 1),
                        "InputWait": ""})  # fmt: skip
    return out


def _round(value: float | None) -> float | str:
    return "" if value is None else round(value, 4)


def import_check(check: Path, csv_path: Path) -> list[str]:
    """Add ``check``'s rows to ``csv_path`` (a row of the same Id is replaced); their Ids."""
    new = from_check(json.loads(Path(check).read_text()))
    text = csv_path.read_text() if csv_path.exists() else ""
    old = list(csv.DictReader(io.StringIO(text))) if text else []
    ids = {r["Id"] for r in new}
    kept = [r for r in old if r["Id"] not in ids]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=HEADER, lineterminator="\n")
    writer.writeheader()
    writer.writerows([*kept, *new])
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    tmp.write_text(buf.getvalue())
    tmp.replace(csv_path)
    rows.cache_clear()
    return [r["Id"] for r in new]


def main(argv: list[str] | None = None) -> int:
    bundled = Path(__file__).resolve().parent.parent / FILE
    p = argparse.ArgumentParser(description="Import a gpu-check JSON as measured rows.")
    p.add_argument("check", type=Path, help="the JSON `bash scripts/gpu-check.sh` wrote")
    p.add_argument("--csv", type=Path, default=bundled, help=f"default: the bundled {FILE}")
    a = p.parse_args(argv)
    try:
        ids = import_check(a.check, a.csv)
    except DataError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{len(ids)} measured row(s) into {a.csv}: " + ", ".join(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
