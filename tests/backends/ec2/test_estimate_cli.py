"""`launch --backend ec2 --dry-run` prices a run before anything is spent: time and euros
with a band and the basis, for every GPU family AWS rents (issue 21's acceptance), both
bundled torch recipes and the MXNet recipes where MXNet runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from finetune.cli import app

# one instance per GPU family (p5e has no on-demand price in the bundled snapshot: p5en)
FAMILIES = {
    "T4": "g4dn.xlarge", "A10G": "g5.12xlarge", "L4": "g6.xlarge", "L40S": "g6e.xlarge",
    "A100": "p4d.24xlarge", "H100": "p5.48xlarge", "H200": "p5en.48xlarge",
    "B200": "p6-b200.48xlarge",
}  # fmt: skip
MXNET_RUNS_ON = ("T4", "A10G", "L4", "L40S", "A100")  # compute capability below 9.0


@pytest.fixture(scope="module")
def wide_dataset(tmp_path_factory):
    """540 training images of 232 px: enough for 8 GPUs x 64 and a 224 px crop."""
    from finetune.data.datasets import prepare_folder

    src = tmp_path_factory.mktemp("src")
    rng = np.random.default_rng(0)
    for label, level in (("dark", 40), ("light", 200)):
        (src / label).mkdir()
        for i in range(300):
            noise = rng.integers(0, 30, (232, 232, 3), dtype="uint8")
            Image.fromarray(noise + level).save(src / label / f"{i}.jpg", quality=70)
    out = tmp_path_factory.mktemp("prepared") / "twoclass"
    prepare_folder(src, out, "twoclass", dict(train_per_class=270, resize=232), workers=1)
    return out


def _dry_run(recipe: str, dataset, instance: str) -> tuple[int, str]:
    """(exit code, the --verbose output with rich's line wrapping undone)."""
    args = ["launch", recipe, "--dataset", str(dataset), "--instance", instance]
    res = CliRunner().invoke(app, [*args, "--backend", "ec2", "--dry-run", "--verbose"])
    return res.exit_code, re.sub(r"\s+", " ", res.output)


def _figures(out: str) -> tuple[float, float, float, float]:
    """(minutes, EUR, EUR low, EUR high) from the estimate's time line."""
    m = re.search(r"~(\d+) min \(.*\): ~([\d.]+) EUR \(band ([\d.]+)-([\d.]+)\)", out)
    assert m, out
    return tuple(float(g) for g in m.groups())


@pytest.mark.parametrize("gpu", list(FAMILIES))
@pytest.mark.parametrize("recipe", ["caltech256-resnet50-torch", "caltech256-resnet152-torch"])
def test_every_gpu_family_gets_time_euros_band_and_basis(ec2_aws, wide_dataset, recipe, gpu):
    code, out = _dry_run(recipe, wide_dataset, FAMILIES[gpu])
    assert code == 0, out
    assert "no throughput figure" not in out
    minutes, eur, low, high = _figures(out)
    assert minutes >= 5 and low <= eur <= high  # 300 s start-up at least; euros in the band
    assert "plain PyTorch-loop (finetune's torch engine) prediction" in out
    assert " GB/s, " in out and "band: the leave" in out  # the roofline: bandwidth, its band
    assert ec2_aws.sent("RunInstances") == []


@pytest.mark.parametrize("gpu", MXNET_RUNS_ON)
def test_mxnet_recipes_are_estimated_where_mxnet_runs(ec2_aws, wide_dataset, gpu):
    for recipe in ("caltech256-resnet50", "caltech256-resnet152"):
        code, out = _dry_run(recipe, wide_dataset, FAMILIES[gpu])
        assert code == 0, out
        _figures(out)
        # MXNet's ImageRecordIter decodes every epoch: the CPU cap is part of the basis
        assert "CPU decode cap" in out and "plain MXNet-loop" in out
