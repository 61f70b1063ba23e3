"""`finetune sweep` end to end on the local backend: a 2x2 grid (engine x batch per device)
of real tiny trainings, interrupted after its second launch and resumed by running the same
command again; then failed cells are left alone unless --retry-failed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default
from finetune.sweep.cells import plan_sweep
from finetune.sweep.execution import run_sweep

pytestmark = pytest.mark.slow

# the tiniest training the suite uses: 32 px ResNet-18, one epoch of two batches
TINY = ["image_size=32", "epochs=1", "schedule.steps=[]", "train.max_batches_per_epoch=2"]
GRID = ["engine=mxnet,torch", "batch_per_device=4,8"]


def _sweep(dataset, *more):
    args = ["sweep", "smoke-resnet18", *TINY, "--dataset", str(dataset)]
    for g in GRID:
        args += ["--grid", g]
    return CliRunner().invoke(app, [*args, *more])


def test_a_2x2_local_sweep_survives_an_interruption_and_resumes(tiny_dataset):
    plan = _sweep(tiny_dataset, "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    doc = json.loads(plan.stdout)
    cells = {tuple(sorted(c["values"].items())): c for c in doc["cells"]}
    assert len(cells) == 4 and doc["total_eur"] == 0.0
    torch8 = cells[(("batch_per_device", "8"), ("engine", "torch"))]
    assert (torch8["engine"], torch8["global_batch"], torch8["lr"]) == ("torch", 8, 0.01)

    sp = plan_sweep("smoke-resnet18", str(tiny_dataset), "local", GRID, overrides=TINY)
    assert sp.sweep_id == doc["sweep_id"]  # the same command names the same sweep
    launches = []

    def ctrl_c_after_second_launch(what, cell, detail):
        if what == "launched":
            launches.append(detail.id)
            if len(launches) == 2:
                raise KeyboardInterrupt  # what Ctrl-C does to the sweep's main thread

    with open_default() as ledger, pytest.raises(KeyboardInterrupt):
        run_sweep(sp, ledger, on_event=ctrl_c_after_second_launch, poll_seconds=0.2)
    with open_default() as ledger:
        first, second = (ledger.get(r) for r in launches)
    assert first.status == "completed" and second.status in ("submitted", "running")
    assert (first.sweep_id, first.sweep_cell) == (sp.sweep_id, sp.cells[0].cell.key)

    resumed = _sweep(tiny_dataset)
    assert resumed.exit_code == 0, resumed.output
    assert f"following {second.id}" in resumed.stderr  # adopted, not launched again
    with open_default() as ledger:
        runs = ledger.list(sweep=sp.sweep_id)
    assert len(runs) == 4 and all(r.status == "completed" for r in runs)
    assert {r.sweep_cell for r in runs} == {c.cell.key for c in sp.cells}
    by_values = {tuple(sorted(r.sweep.items())): r for r in runs}
    torch_run = by_values[(("batch_per_device", "8"), ("engine", "torch"))]
    assert torch_run.plan["hyperparameters"]["engine"] == "torch"
    assert torch_run.plan["hyperparameters"]["model"] == "resnet18"  # renamed for the engine
    assert torch_run.plan["derived"]["global_batch"] == 8

    # a cell whose run failed is left alone (and said so) unless --retry-failed
    with open_default() as ledger:
        ledger.update(torch_run.id, status="failed", exit_reason="test: marked failed")
    again = _sweep(tiny_dataset)
    assert again.exit_code == 1 and "run again with --retry-failed" in again.stderr
    assert "launched" not in again.stderr
    with open_default() as ledger:
        assert len(ledger.list(sweep=sp.sweep_id)) == 4  # nothing was run twice
