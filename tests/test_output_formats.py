"""One output convention: every command that prints a table or a record takes
--format table|json|csv, and its JSON names the table's columns with the same words."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import EpochMetrics
from finetune.runs.ledger import open_default
from finetune.runs.run import Run


def _run(*args, ok=True):
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})  # one line per row
    assert (res.exit_code == 0) is ok, res.output
    return res


def _headers(table: str) -> list[str]:
    """The column names of a table as printed: the line above the rule, split at 2+ spaces."""
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    return re.split(r"\s{2,}", lines[rule - 1].strip())


def _snake(header: str) -> str:  # written out here, not imported from the code under test
    return "_".join(re.findall(r"[a-z0-9]+", header.lower()))


@pytest.fixture
def two_runs():
    with open_default() as led:
        for i, (rid, status) in enumerate([("ft-a", "completed"), ("ft-b", "failed")]):
            led.create(
                Run(
                    id=rid,
                    created_at=1_750_000_000.0 + i,
                    recipe="smoke-resnet18",
                    dataset="shapes",
                    backend="local",
                    status=status,
                    plan={},
                    devices_per_host=1,
                    device_kind="cpu",
                    started_at=1_750_000_000.0,
                    ended_at=1_750_000_100.0 + i,
                )
            )
            led.record_epochs(
                rid,
                [
                    EpochMetrics(
                        epoch=0,
                        samples=80,
                        samples_per_sec=40.0,
                        epoch_seconds=2.0,
                        train_loss=1.0,
                        train_acc=0.5,
                        val_acc=0.25 + i / 2,
                        lr=0.01,
                    )
                ],
            )
    return ["ft-a", "ft-b"]


def test_runs_list_json_keys_are_the_table_headers_and_csv_has_the_values(two_runs):
    headers = _headers(_run("runs", "list").stdout)
    assert len(headers) == 7  # ... BEST VAL ACC, EUR (~PROJECTED): eur_so_far (~eur_projected)
    data = json.loads(_run("runs", "list", "--format", "json").stdout)
    assert [d["id"] for d in data] == two_runs
    for d in data:
        assert {_snake(h) for h in headers} <= set(d), headers
    assert [d["best_val_acc"] for d in data] == [0.25, 0.75]
    rows = list(csv.DictReader(io.StringIO(_run("runs", "list", "--format", "CSV").stdout)))
    # the table leaves out what its rows say already (to fit 120 columns): the creation time
    # (the id's first part) and the backend (the instance's name); CSV keeps every field
    assert {_snake(h) for h in headers} <= set(rows[0])
    assert list(rows[0]) == ["id", "recipe", "backend", "devices", "status", "created_at",
                             "wall_seconds", "best_val_acc", "eur_so_far",
                             "eur_projected"]  # fmt: skip
    assert [(r["backend"], r["created_at"]) for r in rows] == [
        ("local", "2025-06-15T15:06:40+00:00"),
        ("local", "2025-06-15T15:06:41+00:00"),
    ]
    assert [(r["id"], r["status"], float(r["wall_seconds"])) for r in rows] == [
        ("ft-a", "completed", 100.0),
        ("ft-b", "failed", 101.0),
    ]
    assert json.loads(_run("runs", "list", "--json").stdout) == data  # the old flag still works


def test_runs_show_formats(two_runs):
    record = json.loads(_run("runs", "show", "ft-b", "--format", "json").stdout)
    assert record["id"] == "ft-b" and record["best_val_acc"] == 0.75
    assert json.loads(_run("runs", "show", "ft-b", "--json").stdout) == record
    pairs = dict(csv.reader(io.StringIO(_run("runs", "show", "ft-b", "--format", "csv").stdout)))
    assert pairs["id"] == "ft-b" and pairs["status"] == "failed"
    assert float(pairs["best_val_acc"]) == 0.75 and pairs["key"] == "value"
    assert "Run ft-b: failed" in _run("runs", "show", "ft-b").stdout
    bad = _run("runs", "show", "ft-b", "--format", "yaml", ok=False)
    assert bad.exit_code == 2 and "To fix:" in bad.output


def test_recipes_list_and_show(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # only the bundled recipes
    headers = _headers(_run("recipes", "list").stdout)
    rows = json.loads(_run("recipes", "list", "--format", "json").stdout)
    assert {_snake(h) for h in headers} <= set(rows[0]) and "smoke-resnet18" in {
        r["name"] for r in rows
    }
    listed = list(csv.DictReader(io.StringIO(_run("recipes", "list", "--format", "csv").stdout)))
    assert [r["name"] for r in listed] == [r["name"] for r in rows]
    assert list(listed[0]) == [_snake(h) for h in headers]
    pairs = dict(csv.reader(io.StringIO(_run("recipes", "show", "smoke-resnet18", "epochs=3",
                                             "--format", "csv").stdout)))  # fmt: skip
    recipe = json.loads(_run("recipes", "show", "smoke-resnet18", "epochs=3", "--json").stdout)
    assert pairs["schedule.epochs"] == "3" == str(recipe["schedule"]["epochs"])
    assert pairs["model.name"] == recipe["model"]["name"] == "resnet18_v1"


def test_config_show():
    headers = _headers(_run("config", "show").stdout)
    doc = json.loads(_run("config", "show", "--format", "json").stdout)
    assert [_snake(h) for h in headers] == list(doc["settings"][0])
    rows = list(csv.DictReader(io.StringIO(_run("config", "show", "--format", "csv").stdout)))
    assert [r["key"] for r in rows] == [s["key"] for s in doc["settings"]]
    assert json.loads(_run("config", "show", "--json").stdout) == doc


def test_sweep_dry_run(tiny_dataset):
    args = ["sweep", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run",
            "--grid", "batch_per_device=4,8"]  # fmt: skip
    headers = _headers(_run(*args).stdout)
    cells = json.loads(_run(*args, "--format", "json").stdout)["cells"]
    for cell in cells:
        assert {_snake(h) for h in headers} <= set(cell), headers
    rows = list(csv.DictReader(io.StringIO(_run(*args, "--format", "csv").stdout)))
    assert [int(r["global_batch"]) for r in rows] == [c["global_batch"] for c in cells] == [4, 8]
    assert json.loads(_run(*args, "--json").stdout)["cells"] == cells


def test_launch_dry_run_and_test_io_records(tiny_dataset):
    args = ["launch", "smoke-resnet18", "--dataset", str(tiny_dataset), "--dry-run"]
    plan = json.loads(_run(*args, "--format", "json").stdout)
    assert json.loads(_run(*args, "--json").stdout) == plan
    pairs = dict(csv.reader(io.StringIO(_run(*args, "--format", "csv").stdout)))
    assert pairs["hyperparameters.epochs"] == str(plan["hyperparameters"]["epochs"]) == "2"
    assert pairs["recipe.name"] == plan["recipe"]["name"] == "smoke-resnet18"
    assert "Plan:" in _run(*args).stdout
    io_args = ["test-io", str(tiny_dataset), "--data-shape", "32", "--batch-size", "8"]
    read = dict(csv.reader(io.StringIO(_run(*io_args, "--format", "csv").stdout)))
    assert int(read["images"]) >= 8 * 7 and float(read["images_per_second"]) > 0
    assert set(read) - {"key"} == set(json.loads(_run(*io_args, "--format", "json").stdout))


# Every other table-printing command: its table, its JSON records and its CSV rows name the
# same fields (a header's words joined by "_", `_snake`, written out above).


def _three_formats(args, records_of):
    """(headers, JSON records, CSV rows) of ``args``; every record and the CSV carry a field
    for every header."""
    headers = _headers(_run(*args).stdout)
    records = records_of(json.loads(_run(*args, "--format", "json").stdout))
    rows = list(csv.DictReader(io.StringIO(_run(*args, "--format", "csv").stdout)))
    keys = {_snake(h) for h in headers}
    assert records and rows and len(headers) > 3, headers
    for record in records:
        assert keys <= set(record), sorted(keys - set(record))
    assert keys <= set(rows[0]), sorted(keys - set(rows[0]))
    return headers, records, rows


def test_cost_report(two_runs):
    headers, runs, rows = _three_formats(["cost-report"], lambda d: d["runs"])
    assert headers[:3] == ["run ID", "status", "devices"]  # one completed, one failed
    assert {"speedup", "wall speedup", "EUR"} <= set(headers)  # the rest: JSON and CSV
    assert [r["run_id"] for r in runs] == [r["run_id"] for r in rows] == two_runs
    assert [r["best_val_acc"] for r in runs] == [0.25, 0.75]
    assert [float(r["wall_seconds"]) for r in rows] == [100.0, 101.0]
    target = _run("cost-report", "--target-accuracy", "0.2", "--format", "json").stdout
    table = _run("cost-report", "--target-accuracy", "0.2").stdout
    assert {"time to target seconds", "EUR to target"} <= set(_headers(table))
    assert "Target: 20.0% validation accuracy" in table
    assert all(r["time_to_target_seconds"] == 2.0 for r in json.loads(target)["runs"])


@pytest.fixture
def sweep_runs():
    with open_default() as led:
        for i, cpus in enumerate((1, 2)):
            rid = f"ft-s{cpus}"
            led.create(
                Run(
                    id=rid,
                    created_at=1_750_000_000.0 + i,
                    recipe="smoke-resnet18",
                    dataset="shapes",
                    backend="local",
                    status="completed",
                    plan={"hyperparameters": {"model": "resnet18_v1", "batch_per_device": 4}},
                    devices_per_host=cpus,
                    device_kind="cpu",
                    started_at=1_750_000_000.0,
                    ended_at=1_750_000_050.0,
                    sweep_id="sw-formats",
                    sweep_cell=rid,
                    sweep={"cpus": str(cpus)},
                )
            )
            led.record_epochs(rid, [EpochMetrics(epoch=0, samples=80, samples_per_sec=40.0 * cpus,
                                                 epoch_seconds=2.0 / cpus, train_loss=1.0,
                                                 train_acc=0.5, val_acc=0.5, lr=0.01)])  # fmt: skip
    return "sw-formats"


def test_cost_report_of_a_sweep(sweep_runs):
    args = ["cost-report", "--sweep", sweep_runs]
    headers, cells, rows = _three_formats(args, lambda d: d["cells"])
    assert headers[:2] == ["cell", "run ID"] and "peak share" in headers
    assert [c["cell"] for c in cells] == [r["cell"] for r in rows] == ["cpus=1", "cpus=2"]
    assert [c["devices"] for c in cells] == [1, 2]
    assert cells[1]["speedup"] == pytest.approx(2.0)  # 80 img/s against the 1-CPU cell's 40


def test_prices():
    args = ["prices", "--gpu", "V100", "--region", "us-east-1", "--backend", "ec2"]
    headers, offers, rows = _three_formats(args, lambda d: d["offers"])
    assert headers[:3] == ["instance type", "GPU count", "GPU model"]
    assert {"EUR per hour", "spot EUR per hour", "price source", "note"} <= set(headers)
    by_type = {o["instance_type"]: o for o in offers}
    assert by_type["p3.8xlarge"]["gpu_count"] == 4 and by_type["p3.8xlarge"]["gpu_model"] == "V100"
    assert [r["instance_type"] for r in rows] == [o["instance_type"] for o in offers]
    assert by_type["p3.2xlarge"]["note"] == "retired -> g5.2xlarge"


def test_plan(tiny_dataset, monkeypatch):
    monkeypatch.setenv("FINETUNE_REGION", "us-east-1")
    args = ["plan", "smoke-resnet18-torch", "--dataset", str(tiny_dataset), "--max-hosts", "1"]
    headers, plan_rows, rows = _three_formats(args, lambda d: d["rows"])
    # the table: the columns a screen has room for; JSON and CSV: every field, the same names
    assert [_snake(h) for h in headers] == ["rank", "instance", "gpus", "minutes", "eur",
                                            "market", "backend", "pareto", "basis"]  # fmt: skip
    assert list(plan_rows[0]) == list(rows[0]) and "eur_per_epoch" in rows[0]


def test_prepare(image_folder, tmp_path):
    def prepare(out, *fmt):
        return _run("prepare", "folder", str(image_folder), "--out", str(tmp_path / out),
                    "--resize", "32", "--workers", "1", *fmt)  # fmt: skip

    assert "classes" in prepare("t").stdout
    manifest = json.loads(prepare("j", "--format", "json").stdout)
    pairs = dict(csv.reader(io.StringIO(prepare("c", "--format", "csv").stdout)))
    assert pairs["key"] == "value" and pairs["name"] == manifest["name"] == "shapes"
    assert json.loads(pairs["classes"]) == manifest["classes"] and len(manifest["classes"]) == 8
    assert int(pairs["splits.train.count"]) == manifest["splits"]["train"]["count"] > 0
    assert json.loads(prepare("a", "--json").stdout)["classes"] == manifest["classes"]  # old flag
    bad = _run("prepare", "folder", str(image_folder), "--out", str(tmp_path / "x"),
               "--format", "yml", ok=False)  # fmt: skip
    assert bad.exit_code == 2 and "To fix:" in bad.output and not (tmp_path / "x").exists()


def test_json_times_are_iso_8601_with_their_zone(two_runs):
    from datetime import datetime

    run = json.loads(_run("runs", "show", "ft-a", "--format", "json").stdout)
    listed = json.loads(_run("runs", "list", "--format", "json").stdout)
    for record in (run, *listed):
        for key in ("created_at", "started_at", "ended_at"):
            when = datetime.fromisoformat(record[key])
            assert when.utcoffset() is not None and record[key].endswith("+00:00"), key
    assert datetime.fromisoformat(run["created_at"]).timestamp() == 1_750_000_000.0
