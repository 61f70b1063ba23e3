"""`finetune cost-report` over a real SQLite ledger, with hand-computed figures."""

from __future__ import annotations

import csv
import io
import json
from datetime import date

import pytest
from runfacts import pin_eur_rate
from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import EpochMetrics
from finetune.runs.ledger import open_default
from finetune.runs.run import Run

RATE = 1.10  # USD per EUR: the rate pinned for the day the runs ended (2025-06-15)
# (run id, instance, GPUs, USD/h, billable s, img/s per epoch)
RUNS = [
    ("ft-1gpu", "ml.p3.2xlarge", 1, 3.825, 3600.0, 100.0),
    ("ft-4gpu", "ml.p3.8xlarge", 4, 14.688, 1200.0, 380.0),
    ("ft-8gpu", "ml.p3.16xlarge", 8, 28.152, 700.0, 720.0),
]


def _plan(instance: str, hourly: float) -> dict:
    return {
        "dataset": {"name": "caltech256"},
        "hyperparameters": {"model": "imagenet11k-resnet-152", "epochs": 2},
        "estimate": {
            "hourly_usd": hourly,
            "price_as_of": "2025-05-31",
            "price_source": "AWS list price (test)",
            "usd_per_eur": RATE,
            "rate_date": "2025-06-30",
        },
    }


def _epochs(ips: float, accs=(0.6, 0.9)) -> list[EpochMetrics]:
    return [
        EpochMetrics(
            epoch=i,
            samples=15420,
            samples_per_sec=ips,
            epoch_seconds=15420 / ips,
            train_loss=1.0,
            train_acc=a,
            val_acc=a,
            lr=0.01,
        )
        for i, a in enumerate(accs)
    ]


@pytest.fixture
def ledger_with_runs():
    pin_eur_rate(date(2025, 6, 15), RATE)
    with open_default() as led:
        for i, (rid, inst, gpus, hourly, billable, ips) in enumerate(RUNS):
            led.create(
                Run(
                    id=rid,
                    created_at=1_750_000_000.0 + i,
                    recipe="caltech256-resnet152",
                    dataset="caltech256",
                    backend="sagemaker",
                    status="completed",
                    plan=_plan(inst, hourly),
                    instance_type=inst,
                    devices_per_host=gpus,
                    device_kind="gpu",
                    region="us-east-1",
                    started_at=1_750_000_000.0,
                    ended_at=1_750_000_000.0 + billable,
                )
            )
            led.update(rid, billable_seconds=billable)
            led.record_epochs(rid, _epochs(ips))
    return [r[0] for r in RUNS]


def _invoke(*args):
    return CliRunner().invoke(app, ["cost-report", *args])


def test_json_figures_match_hand_computation(ledger_with_runs):
    res = _invoke("--format", "json", "--target-accuracy", "0.85")
    assert res.exit_code == 0, res.output
    rows = {r["run_id"]: r for r in json.loads(res.output)["runs"]}
    assert rows["ft-4gpu"]["speedup"] == pytest.approx(3.8)
    assert rows["ft-4gpu"]["efficiency"] == pytest.approx(0.95)
    assert rows["ft-8gpu"]["efficiency"] == pytest.approx(0.9)
    assert rows["ft-1gpu"]["eur"] == pytest.approx(3600 * 3.825 / 3600 / RATE)
    assert rows["ft-8gpu"]["eur"] == pytest.approx(700 * 28.152 / 3600 / RATE)
    assert rows["ft-8gpu"]["eur_per_epoch"] == pytest.approx(700 * 28.152 / 3600 / RATE / 2)
    assert rows["ft-4gpu"]["images_per_sec_per_device"] == pytest.approx(95.0)
    assert rows["ft-1gpu"]["best_val_acc"] == pytest.approx(0.9)
    assert rows["ft-1gpu"]["time_to_target_seconds"] == pytest.approx(2 * 15420 / 100)


def test_table_csv_markdown_and_provenance(ledger_with_runs):
    table = _invoke()
    assert table.exit_code == 0, table.output
    assert "ft-8gpu" in table.output and "90" in table.output
    assert "AWS list price (test)" in table.output and "2025-06-15" in table.output
    rows = list(csv.DictReader(io.StringIO(_invoke("--format", "csv").output)))
    assert {r["run_id"] for r in rows} == set(ledger_with_runs)
    md = _invoke("--format", "md").output
    assert md.lstrip().startswith("|") or "| " in md


def test_filters_and_plot(ledger_with_runs, tmp_path):
    res = _invoke("ft-1gpu", "ft-8gpu", "--format", "json", "--plot", str(tmp_path / "p.png"))
    assert res.exit_code == 0, res.output
    assert [r["run_id"] for r in json.loads(res.output[: res.output.rindex("}") + 1])["runs"]] == [
        "ft-1gpu",
        "ft-8gpu",
    ]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _invoke("--recipe", "other").exit_code == 2


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--since", "yesterday"], "YYYY-MM-DD"),
        (["--format", "jsn"], 'Did you mean "json"'),
        (["--plot", "x.pdf"], ".png"),
        (["nope"], "no run"),
    ],
)
def test_bad_input(ledger_with_runs, args, text):
    res = _invoke(*args)
    assert res.exit_code != 0 and text in res.output and "To fix:" in res.output


def test_run_without_metrics_is_reported_not_crashed(ledger_with_runs):
    with open_default() as led:
        led.create(
            Run(
                id="ft-empty",
                created_at=1_750_000_100.0,
                recipe="caltech256-resnet152",
                dataset="caltech256",
                backend="sagemaker",
                status="failed",
                plan=_plan("ml.p3.2xlarge", 3.825),
                instance_type="ml.p3.2xlarge",
                device_kind="gpu",
                started_at=1_750_000_100.0,
                ended_at=1_750_000_160.0,
            )
        )
    res = _invoke("--format", "json")
    assert res.exit_code == 0, res.output
    row = {r["run_id"]: r for r in json.loads(res.output)["runs"]}["ft-empty"]
    assert row["images_per_sec"] is None and row["eur"] == pytest.approx(60 * 3.825 / 3600 / RATE)


def test_no_runs_at_all():
    res = _invoke()
    assert res.exit_code == 2 and "finetune launch" in res.output


def test_plot_into_a_missing_folder_creates_nothing(ledger_with_runs, tmp_path):
    target = tmp_path / "nonexistent_dir" / "r.png"
    res = _invoke("--plot", str(target))
    assert res.exit_code == 2, res.output
    assert "does not exist" in res.output and "To fix:" in res.output
    assert not target.parent.exists()


def test_plot_into_a_read_only_folder_is_a_clear_error(ledger_with_runs, tmp_path):
    import os

    from tests.fs_faults import READ_ONLY, assert_clear_error, finetune_in

    folder = tmp_path / "ro"
    folder.mkdir()
    env = {"FINETUNE_DATA_DIR": os.environ["FINETUNE_DATA_DIR"]}
    res = finetune_in(READ_ONLY, folder, "cost-report", "--plot", str(folder / "r.png"), env=env)
    assert_clear_error(res, 3, "Cannot write the plot", "Read-only file system")
    assert list(folder.iterdir()) == []


def test_plot_replaces_only_a_plot_finetune_wrote(ledger_with_runs, tmp_path):
    photo = tmp_path / "holiday.png"
    mine = b"\x89PNG\r\n\x1a\n the user's own picture"
    photo.write_bytes(mine)
    res = _invoke("--plot", str(photo))
    assert res.exit_code == 2, res.output
    assert "not a plot finetune wrote" in res.output and "To fix:" in res.output
    assert photo.read_bytes() == mine
    # its own plot, though, is replaced by the next report (the usual loop)
    ours = tmp_path / "scaling.svg"
    assert _invoke("--plot", str(ours)).exit_code == 0
    first = ours.read_bytes()
    res = _invoke("ft-1gpu", "ft-8gpu", "--plot", str(ours))
    assert res.exit_code == 0, res.output
    assert ours.read_bytes() != first  # written again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["holiday.png", "scaling.svg"]
