"""`cost-report --sweep ID` over a real ledger: the seeds' table with hand-computed figures,
a bad row and a failed run left out (and said so), the physical-limit view, and the plots."""

from __future__ import annotations

import json
from datetime import date

import pytest
from runfacts import pin_eur_rate
from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import EpochMetrics
from finetune.estimate.money import EC2, Charge
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

RATE = 1.25  # USD per EUR, pinned for 2025-06-16 (a Monday)
T0 = 1_750_075_200.0  # 2025-06-16 12:00 UTC
SWEEP = "sw-test"
# (run id, instance, GPUs, USD/h, seconds, img/s, engine, status, accuracies)
CELLS = [
    ("r1", "g5.xlarge", 1, 1.0, 900.0, 100.0, "mxnet", "completed", (0.5, 0.8)),
    ("r4", "g5.12xlarge", 4, 5.0, 300.0, 360.0, "mxnet", "completed", (0.6, 0.76)),
    ("t4", "g5.12xlarge", 4, 5.0, 360.0, 300.0, "torch", "completed", (0.6, 0.75)),
    ("bad", "g5.xlarge", 1, 1.0, 600.0, 100.0, "torch", "completed", (0.5, 0.8)),
    ("dead", "g5.12xlarge", 4, 5.0, 60.0, 50.0, "mxnet", "failed", (0.1, 0.1)),
]


def _epochs(ips, accs):
    return [
        EpochMetrics(epoch=i, samples=1000, samples_per_sec=ips, epoch_seconds=1000 / ips,
                     train_loss=1.0, train_acc=a, val_acc=a, lr=0.01)
        for i, a in enumerate(accs)
    ]  # fmt: skip


@pytest.fixture
def sweep_ledger():
    pin_eur_rate(date(2025, 6, 16), RATE)
    with open_default() as led:
        for i, (rid, inst, gpus, usd, secs, ips, engine, status, accs) in enumerate(CELLS):
            end = T0 + secs if rid != "bad" else T0 - 30  # SageMaker's clock vs ours
            # r1 was recorded before issue 20 named it batch_per_device: r4's baseline still
            batch = "batch_size_per_device" if rid == "r1" else "batch_per_device"
            hp = {"model": "resnet50_v1", "engine": engine, batch: 16,
                  "image_size": 224, "epochs": 2}  # fmt: skip
            led.create(Run(
                id=rid, created_at=T0 + i, recipe="caltech256-resnet50", dataset="caltech256",
                backend="ec2", status=status, plan={"hyperparameters": hp},
                instance_type=inst, devices_per_host=gpus, device_kind="gpu", region="us-east-1",
                started_at=T0, ended_at=end, sweep_id=SWEEP, sweep_cell=rid,
                sweep={"instance": inst, "engine": engine},
                charges=[Charge(EC2, inst, 1, secs, usd, "test price", None,
                                started_at=T0, ended_at=T0 + secs).to_dict()],
            ))  # fmt: skip
            led.record_epochs(rid, _epochs(ips, accs))


def _report(*args):
    # wide enough for one line per cell (fitting narrow terminals is tested with the tables)
    return CliRunner().invoke(app, ["cost-report", "--sweep", SWEEP, *args], env={"COLUMNS": "400"})


def test_the_seeds_table_with_efficiency_euros_and_the_physical_limit(sweep_ledger):
    res = _report("--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    cells = {c["run_id"]: c for c in doc["cells"]}
    assert set(cells) == {"r1", "r4", "t4"}  # the bad row and the failed run are left out
    assert any(
        n.startswith("bad: skipped: run bad ends 30 s before it starts") for n in doc["notes"]
    )
    assert "dead: failed, left out." in doc["notes"]
    assert doc["target_acc"] == 0.75  # the best accuracy every completed cell reached
    r1, r4, t4 = cells["r1"], cells["r4"], cells["t4"]
    assert r1["speedup"] is None  # the 1-GPU cell is the baseline, not a measurement
    assert r4["speedup"] == pytest.approx(3.6) and r4["efficiency"] == pytest.approx(0.9)
    assert t4["speedup"] is None  # no 1-GPU torch cell: no efficiency, and a note says why
    assert any(n.startswith("t4: no efficiency: no other 1-device run") for n in doc["notes"])
    # euros: 900 s x 1.0 USD/h / 1.25 = 0.20 EUR; per epoch 0.10; per accuracy point 0.2 / 80
    assert r1["eur"] == pytest.approx(0.2) and r1["eur_per_epoch"] == pytest.approx(0.1)
    assert r1["eur_per_point"] == pytest.approx(0.2 / 80)
    # time to 75 %: every cell reached it at the end of its epoch 2 (2 x 1000 images / img/s)
    assert r1["time_to_target_seconds"] == pytest.approx(20.0)
    assert r4["time_to_target_seconds"] == pytest.approx(2000 / 360)
    # ResNet-50 at 224 px: 6 x 4.09 GMAC = 24.54 GFLOP per training image; 360 img/s
    assert r4["achieved_tflops"] == pytest.approx(360 * 24.54 / 1000)
    # A10G: 70 dense bf16 TFLOP/s per GPU (catalog/gpu_peaks.csv, sourced), 4 GPUs
    assert r4["peak_tflops"] == pytest.approx(4 * 70.0)
    assert r4["eur_at_peak"] == pytest.approx(r4["eur"] * r4["achieved_tflops"] / 280.0)
    table = _report().stdout
    row = next(line for line in table.splitlines() if " r4 " in line)
    for cell in ("engine=mxnet", "g5.12xlarge", "4 GPU", "3.60x", "90.0 %", "8.83"):
        assert cell in row
    assert "Prices: g5.xlarge on-demand USD 1/h (test price)" in table


def test_a_bad_row_does_not_sink_the_whole_report(sweep_ledger):
    res = CliRunner().invoke(app, ["cost-report"])
    assert res.exit_code == 0, res.output
    assert "bad: skipped: run bad ends 30 s before it starts" in res.stdout
    assert "r4" in res.stdout and "dead" in res.stdout  # the plain report lists every run
    alone = CliRunner().invoke(app, ["cost-report", "r4", "--format", "json"])
    (row,) = json.loads(alone.stdout)["runs"]
    assert row["speedup"] == pytest.approx(3.6)  # its baseline r1 is found in the ledger


def test_plots_render_with_an_integer_axis_a_pareto_front_and_no_failed_runs(
    sweep_ledger, tmp_path
):
    png, svg = tmp_path / "sweep.png", tmp_path / "sweep.svg"
    for path in (png, svg):
        res = _report("--plot", str(path))
        assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    text = svg.read_text()
    for label in ("ideal (linear)", "Pareto front", "efficiency 4: 90%", "g5.12xlarge torch"):
        assert label in text
    assert "dead" not in text and "50.0" not in text
