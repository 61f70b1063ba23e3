"""Sweep planning without running anything: the grid, cell identity, per-cell scaling and
estimates, the --max-eur refusal and bad grids."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.errors import UsageError
from finetune.sweep import grid as g
from finetune.sweep.cells import plan_sweep

CLOUD = ["data.image_size=32", "epochs=2", "schedule.steps=[1]", "schedule.warmup_epochs=0"]


def test_grid_expands_every_combination_first_key_slowest():
    grid = g.parse_grid(["instance=a,b", "batch_per_device=16,32"])
    assert g.expand(grid) == [
        (("instance", "a"), ("batch_per_device", "16")),
        (("instance", "a"), ("batch_per_device", "32")),
        (("instance", "b"), ("batch_per_device", "16")),
        (("instance", "b"), ("batch_per_device", "32")),
    ]
    for bad in (["instance"], ["instance="], ["x=1", "x=2"], ["x=1,1"]):
        with pytest.raises(UsageError):
            g.parse_grid(bad)


def test_cell_identity_is_recipe_dataset_engine_backend_and_values():
    key = g.cell_key("r", "sha", "mxnet", "ec2", [("batch_per_device", "16")])
    assert key == g.cell_key("r", "sha", "mxnet", "ec2", [("batch_per_device", "16")])
    for other in (
        ("r2", "sha", "mxnet", "ec2", [("batch_per_device", "16")]),
        ("r", "sha2", "mxnet", "ec2", [("batch_per_device", "16")]),
        ("r", "sha", "torch", "ec2", [("batch_per_device", "16")]),
        ("r", "sha", "mxnet", "sagemaker", [("batch_per_device", "16")]),
        ("r", "sha", "mxnet", "ec2", [("batch_per_device", "32")]),
    ):
        assert g.cell_key(*other) != key


def test_engine_cells_rename_the_model_to_the_same_resnet():
    assert g.model_for_engine("resnet50_v1", "torch") == "resnet50"
    assert g.model_for_engine("resnet50", "mxnet") == "resnet50_v1b"
    assert g.recipe_overrides([("engine", "torch")], "mxnet", "resnet18_v1") == [
        "engine=torch",
        "model.name=resnet18",
    ]


def test_cloud_cells_derive_batch_and_lr_and_refuse_above_max_eur(tiny_dataset):
    sp = plan_sweep(
        "caltech256-resnet50",
        str(tiny_dataset),
        "ec2",
        ["instance=p3.2xlarge,p3.8xlarge", "batch_per_device=2"],
        overrides=CLOUD,
    )
    one, four = sp.cells
    # linear scaling rule: global batch = 2 x GPUs, lr = 0.0025 (recipe's per GPU) x GPUs
    assert (one.plan.derived.global_batch, one.plan.derived.lr) == (2, 0.0025)
    assert (four.plan.derived.global_batch, four.plan.derived.lr) == (8, 0.01)
    # 80 images x 2 epochs at the V100 reference (298.51 img/s, x4 at 93.75 %) + 300 s
    # start-up, billed at the catalog snapshot's 3.06 / 12.24 USD/h and the ECB's 1.1172
    assert one.eur == pytest.approx(301 * 3.06 / 3600 / 1.1172)
    assert four.eur == pytest.approx(301 * 12.24 / 3600 / 1.1172)
    assert sp.total_eur == pytest.approx(one.eur + four.eur)
    with pytest.raises(UsageError, match="more than --max-eur 1"):
        sp.check_budget(1.0)
    sp.check_budget(2.0)


def test_bad_sweeps_fail_before_anything_runs(tiny_dataset):
    def sweep(*args):
        return CliRunner().invoke(
            app, ["sweep", "smoke-resnet18", "--dataset", str(tiny_dataset), *args]
        )

    res = sweep("--grid", "instance=g5.xlarge")
    assert res.exit_code == 2 and "needs a cloud backend" in res.output
    res = sweep("--backend", "ec2", "--grid", "batch_per_device=4")
    assert res.exit_code == 2 and "needs instance types" in res.output
    res = sweep("--grid", "cpus=0")
    assert res.exit_code == 2 and "not a positive whole number" in res.output
    res = sweep("--grid", "train.batch_per_devicex=4")
    assert res.exit_code != 0 and "batch_per_devicex" in res.output
