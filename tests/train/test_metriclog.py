"""The optional metric loggers (finetune.train.metriclog): a real training run writes its
figures to TensorBoard event files and an MLflow store, and each is read back by an
independent reader (TensorBoard's own event loader, MLflow through its own client)
and compared with metrics.jsonl read as plain JSON; a logger that cannot start never stops a
run; a resumed run continues its MLflow run."""

from __future__ import annotations

import hashlib
import json
from importlib.util import find_spec
from pathlib import Path

import pytest

pytest.importorskip("torch")

from finetune.contracts.container import Layout
from finetune.errors import ConfigError
from finetune.recipes.loading import load_recipe
from finetune.train.engines.torch import RUNTIME
from finetune.train.layout import load_job
from finetune.train.metriclog.mlflowlog import RUN_ID_FILE, MlflowLogger

from .conftest import hparams, make_tree

# the loggers' packages (tensorboard: the reader, the [dev] extra) are looked for, not imported:
# the tests import them when they run; mlflow's import alone is ~1.2 CPU-s at each test
# worker's collection
_MISSING = [m for m in ("tensorboardX", "tensorboard", "mlflow") if find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING}")

EUR_PER_HOUR = 3.6  # so euros so far = seconds / 1000


def _thp(**overrides):
    base = dict(engine="torch", model="resnet18", loader_workers=0, data_path="resident")
    base.update(overrides)
    return hparams(**base)


def read_event_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in a folder of TensorBoard event files, read by TensorBoard's own loader
    (the EventAccumulator `tensorboard --logdir` uses; all points kept, none sampled)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert sorted(folder.glob("events.out.tfevents.*")), f"no event file in {folder}"
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0}).Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@pytest.mark.slow
def test_a_run_logs_to_tensorboard_and_mlflow_what_its_metrics_file_says(
    tmp_path, tiny_dataset, monkeypatch
):
    monkeypatch.setenv("FINETUNE_LOG_EVERY", "2")
    monkeypatch.setenv("FINETUNE_RUN_ID", "ft-test-run")
    hp = _thp(
        metric_loggers=("tensorboard", "mlflow"),
        mlflow_experiment="caltech-test",
        eur_per_hour=EUR_PER_HOUR,
        max_batches_per_epoch=4,
    )
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    result = RUNTIME.fit(load_job(Layout(root)))
    assert result.stopped_by is None
    out = root / "output" / "data"
    assert Layout(root).tensorboard_dir == root / "output" / "tensorboard"  # SageMaker's path
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(events) == 2
    steps_per_epoch = 4
    epoch_steps = [steps_per_epoch * (i + 1) for i in range(2)]
    spent, eur = 0.0, []
    for e in events:
        spent += e["epoch_seconds"]
        eur.append(spent * EUR_PER_HOUR / 3600)

    tb = read_event_scalars(root / "output" / "tensorboard")
    assert [s for s, _ in tb["epoch/val_acc"]] == epoch_steps
    assert [v for _, v in tb["epoch/val_acc"]] == pytest.approx([e["val_acc"] for e in events])
    assert [v for _, v in tb["epoch/train_acc"]] == pytest.approx([e["train_acc"] for e in events])
    assert [v for _, v in tb["epoch/eur_so_far"]] == pytest.approx(eur, rel=1e-6)
    loss_steps = [s for s, _ in tb["train/loss"]]
    assert loss_steps == sorted(loss_steps) and loss_steps[0] == 2  # every 2nd step
    assert all(v > 0 for _, v in tb["train/images_per_sec"])
    assert [v for _, v in tb["train/lr"]] == pytest.approx([0.001] * len(loss_steps))  # float32

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    exp = client.get_experiment_by_name("caltech-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "ft-test-run" and run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.001" and run.data.params["model"] == "resnet18"
    manifest = hashlib.sha256((tiny_dataset / "manifest.json").read_bytes()).hexdigest()
    assert run.data.tags["finetune.dataset_manifest_sha256"] == manifest
    history = client.get_metric_history(run.info.run_id, "epoch/val_acc")
    assert [(m.step, m.value) for m in history] == [
        (s, pytest.approx(e["val_acc"])) for s, e in zip(epoch_steps, events, strict=True)
    ]
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == len(tb["train/loss"])


def test_a_logger_that_cannot_start_is_dropped_and_the_run_completes(
    tmp_path, tiny_dataset, capsys
):
    hp = _thp(
        epochs=1,
        max_batches_per_epoch=2,
        metric_loggers=("mlflow",),
        mlflow_tracking_uri="nosuchscheme://nowhere",
    )
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    result = RUNTIME.fit(load_job(Layout(root)))
    assert result.stopped_by is None
    assert (root / "model" / "hyperparameters.json").is_file()
    said = capsys.readouterr().out
    assert "finetune-warning metric logger mlflow could not start" in said
    assert "the run goes on without it" in said


def test_a_resumed_run_continues_its_mlflow_run_and_a_new_store_starts_a_new_one(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ckpt = tmp_path / "checkpoints"
    first = MlflowLogger(uri, "exp", "ft-1", ckpt)
    first.params({"lr": "0.1"}, {"finetune.run": "ft-1"})
    first.scalars(5, {"train/loss": 2.0})
    first.close("KILLED")
    assert json.loads((ckpt / RUN_ID_FILE).read_text())["run_id"] == first.run_id

    again = MlflowLogger(uri, "exp", "ft-1", ckpt)
    assert again.run_id == first.run_id and again.resumed
    again.params({"lr": "0.1"}, {"finetune.run": "ft-1"})  # params are write-once: not resent
    again.scalars(10, {"train/loss": 1.0})
    again.close("FINISHED")
    run = again.client.get_run(first.run_id)
    assert run.info.status == "FINISHED"
    history = again.client.get_metric_history(first.run_id, "train/loss")
    assert [(m.step, m.value) for m in history] == [(5, 2.0), (10, 1.0)]

    # the same file through another URI stands for another store (cheaper than a second one)
    elsewhere = MlflowLogger(f"sqlite:////{tmp_path / 'mlflow.db'}", "exp", "ft-1", ckpt)
    assert elsewhere.run_id != first.run_id and not elsewhere.resumed


def test_a_recipe_names_its_loggers_and_the_plan_carries_them(tmp_path):
    recipe = load_recipe(
        "caltech256-resnet50-torch",
        ["metric_logging.loggers=[tensorboard, mlflow]", "metric_logging.mlflow_experiment=x"],
    )
    assert recipe.metric_logging.loggers == ("tensorboard", "mlflow")
    with pytest.raises(ConfigError) as bad:
        load_recipe("caltech256-resnet50-torch", ["metric_logging.loggers=[wandb]"])
    assert "metric_logging.loggers" in str(bad.value)
    with pytest.raises(ConfigError):
        load_recipe("caltech256-resnet50-torch", ["metric_logging.loggers=[mlflow, mlflow]"])


def test_the_plan_carries_the_loggers_and_the_estimates_hourly_euros(tiny_dataset):
    from finetune.estimate.planned import Estimate
    from finetune.plan.build import build_plan

    plan = build_plan(
        "caltech256-resnet50-torch",
        tiny_dataset,
        overrides=[
            "data.image_size=32",
            "train.batch_per_device=8",
            "metric_logging.loggers=[mlflow]",
        ],
        verify_checksums=False,
    )
    hp = plan.hyperparameters
    assert hp.metric_loggers == ("mlflow",)
    assert hp.mlflow_experiment == "caltech256-resnet50-torch"  # the recipe's name by default
    assert hp.eur_per_hour == 0.0  # no estimate: this machine
    priced = plan.with_estimate(Estimate(instance_type="g5.xlarge", eur_per_hour=1.25))
    assert priced.hyperparameters.eur_per_hour == 1.25
    assert priced.hyperparameters.to_strings()["metric_loggers"] == '["mlflow"]'
