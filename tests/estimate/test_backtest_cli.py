"""`python -m finetune.estimate.perf.backtest ROWS.csv`: your own figures against the model,
run as a user runs it (a subprocess), on a small CSV in calibration.csv's columns."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from finetune.estimate.perf import calibration

ROOT = Path(__file__).resolve().parents[2]
PICK = ("lambda-h100_80gb_sxm5_v1-amp", "timm-rtx3090-nhwc-resnet50",
        "mlperfv40-nvidia-h200_ngc24.04_mxnet")  # fmt: skip


def _rows() -> list[dict[str, str]]:
    with resources.files("finetune.catalog").joinpath("calibration.csv").open() as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(calibration.HEADER))
        w.writeheader()
        w.writerows({k: r[k] for k in calibration.HEADER} for r in rows)
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "finetune.estimate.perf.backtest", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    rows = [r for r in _rows() if r["Id"] in PICK]
    return _write(tmp_path_factory.mktemp("rows") / "mine.csv", rows)


def test_json_has_every_row_its_errors_and_the_share_inside(small):
    res = _run(str(small), "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"rows", "median_abs_error", "worst_abs_error", "inside_band", "n"}
    in_file = [r["Id"] for r in _rows() if r["Id"] in PICK]
    assert out["n"] == 3 and [r["id"] for r in out["rows"]] == in_file
    published = {r["Id"]: float(r["ImagesPerSec"]) for r in _rows()}
    errors = []
    for r in out["rows"]:
        assert r["published"] == published[r["id"]] and r["low"] <= r["predicted"] <= r["high"]
        want = (r["predicted"] - r["published"]) / r["published"]
        assert r["error"] == pytest.approx(want) and r["error"] != 0  # not learned from it
        assert r["inside_band"] == (r["low"] <= r["published"] <= r["high"])
        errors.append(abs(r["error"]))
    assert out["worst_abs_error"] == pytest.approx(max(errors))
    assert out["median_abs_error"] == pytest.approx(sorted(errors)[1])
    assert out["inside_band"] == sum(r["inside_band"] for r in out["rows"])


def test_the_table_prints_each_row_then_the_summary(small):
    res = _run(str(small))
    assert res.returncode == 0, res.stderr
    for rid in PICK:
        assert rid[:48] in res.stdout
    assert "3 row(s): median |error|" in res.stdout and "inside the band" in res.stdout


@pytest.mark.parametrize(
    ("column", "value", "named"),
    [("GpuModel", "RTX 9999", "unknown GPU 'RTX 9999'"),
     ("Network", "vgg16", "unknown network 'vgg16'")],
)  # fmt: skip
def test_an_unknown_gpu_or_network_names_the_known_ones(tmp_path, column, value, named):
    rows = [r for r in _rows() if r["Id"] == PICK[0]]
    rows[0][column] = value
    res = _run(str(_write(tmp_path / "bad.csv", rows)))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert named in res.stderr
    known = "H100 SXM" if column == "GpuModel" else "resnet50"
    assert "use one of:" in res.stderr and known in res.stderr


def test_a_file_without_calibrations_columns_says_which_are_missing(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("Id,Network\nx,resnet50\n")
    res = _run(str(path))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "lacks the columns" in res.stderr and "GpuModel" in res.stderr
