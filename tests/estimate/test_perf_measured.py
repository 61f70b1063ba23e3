"""gpu-check's measurements feed the performance model (issue 31): the GPU runs' JSONs (one
H200, 2026-11-26; one H100 SXM, 2026-11-28; as the check wrote them) import as measured rows
with one command, the bundled rows are those figures, `finetune plan` labels them "measured",
and another GPU takes the roofline fitted to them (and every other row), not a ratio."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.errors import DataError
from finetune.estimate.perf import calibration, measured
from finetune.estimate.perf.throughput import Setup, predict

CHECK = Path(__file__).parent / "fixtures" / "gpu-check-2026-11-26-h200.json"
H200_ENGINE_EAGER = 4310.1  # the check's "engine resident compile=off" samples_per_sec
CHECK_H100 = Path(__file__).parent / "fixtures" / "gpu-check-2026-11-28-h100.json"
H100_ENGINE_EAGER = 3958.0  # the same on one H100 SXM, two days later (as imported: 4 digits)


def test_the_check_imports_as_measured_rows_with_one_command(tmp_path):
    out = tmp_path / "measured.csv"
    assert measured.main([str(CHECK), "--csv", str(out)]) == 0
    got = {r["Id"]: r for r in csv.DictReader(out.open())}
    row = got["gpucheck-20261126-h200-resnet50-engine-resident-eager"]
    assert (row["GpuModel"], row["Precision"], row["BatchPerDevice"], row["Layout"]) == (
        "H200", "bf16", "256", "channels_last"
    )  # fmt: skip
    assert (row["Compile"], row["Kind"], row["DataPath"]) == ("eager", "engine", "resident")
    assert (row["Torch"], row["Cuda"], row["Date"]) == ("2.11.0+cu130", "13.0", "2026-11-26")
    assert float(row["ImagesPerSec"]) == H200_ENGINE_EAGER and float(row["InputWait"]) == 0.088
    assert len(got) == 4  # the engine jobs; its references had no plain-loop check: left out
    assert measured.main([str(CHECK), "--csv", str(out)]) == 0  # again: replaced, not doubled
    assert len(list(csv.DictReader(out.open()))) == 4
    bundled = {r.id: r for r in measured.rows()}
    for key, r in got.items():  # the bundled rows are this very run's figures
        assert bundled[key].images_per_sec == float(r["ImagesPerSec"])


def test_a_check_whose_references_agreed_imports_its_plain_loops_too(tmp_path):
    # the H100 run (2026-11-28): every network-alone reference within 3 % of its plain loop,
    # so the plain loops are rows too, beside the four engine jobs
    out = tmp_path / "measured.csv"
    assert measured.main([str(CHECK_H100), "--csv", str(out)]) == 0
    got = {r["Id"]: r for r in csv.DictReader(out.open())}
    kinds = sorted((r["Network"], r["Kind"], r["Compile"], r["DataPath"]) for r in got.values())
    assert kinds == [
        ("resnet152", "plain", "eager", ""),
        ("resnet50", "engine", "eager", "resident"),
        ("resnet50", "engine", "eager", "stream"),
        ("resnet50", "engine", "inductor", "resident"),
        ("resnet50", "engine", "inductor", "stream"),
        ("resnet50", "plain", "eager", ""),
        ("resnet50", "plain", "inductor", ""),
    ]
    assert {r["GpuModel"] for r in got.values()} == {"H100 SXM"}
    eager = got["gpucheck-20261128-h100-sxm-resnet50-engine-resident-eager"]
    assert float(eager["ImagesPerSec"]) == H100_ENGINE_EAGER
    bundled = {r.id: r for r in measured.rows()}
    for key, r in got.items():  # the bundled rows are this very run's figures
        assert bundled[key].images_per_sec == float(r["ImagesPerSec"])


def test_a_dry_run_report_is_refused_with_what_to_do(tmp_path):
    dry = json.loads(CHECK.read_text()) | {"mode": "cpu-dry"}
    with pytest.raises(DataError, match="without a GPU") as err:
        measured.from_check(dry)
    assert "import the JSON of a run on a GPU" in err.value.fix


def test_h200_is_measured_and_h100_is_the_roofline_of_the_h200s_stack():
    eager = predict(Setup("resnet50", "H200", "bf16", 256))
    compiled = predict(Setup("resnet50", "H200", "bf16", 256, compile=True))
    assert eager.measured and eager.images_per_sec == pytest.approx(H200_ENGINE_EAGER)
    assert compiled.measured and compiled.images_per_sec == pytest.approx(5820.6)
    assert "measured" in eager.basis[0] and "2.11.0+cu130" in eager.basis[0]
    # every H100 row left out (its own and the published ones): the engine's stack, fitted to
    # the H200's rows, on the H100's roofs (same tensor peak, 0.70x the bandwidth), not a
    # suite's ratio; the H100 measured later falls inside that band
    h100_rows = frozenset(r.id for r in calibration.rows() if r.gpu_model == "H100 SXM") | {
        r.id for r in measured.rows() if r.gpu_model == "H100 SXM"}  # fmt: skip
    h100 = predict(Setup("resnet50", "H100 SXM", "bf16", 256), exclude=h100_rows)
    assert not h100.measured and h100.level == 2
    assert "pytorch/resident/engine/nhwc/eager" in h100.basis[2] and "H200" in h100.basis[2]
    assert h100.low <= H100_ENGINE_EAGER <= h100.high
    assert abs(h100.images_per_sec / H100_ENGINE_EAGER - 1) < 0.10  # -2.9 % on 2026-11-28
    own = predict(Setup("resnet50", "H100 SXM", "bf16", 256))
    assert own.measured and own.images_per_sec == pytest.approx(H100_ENGINE_EAGER)
    assert "measured: gpucheck-20261128-h100-sxm-resnet50-engine-resident-eager" in own.basis[0]
    # a batch more than 2x from every measured one is the model's again, as is an NCHW run
    assert not predict(Setup("resnet50", "H200", "bf16", 64)).measured
    assert not predict(Setup("resnet50", "H200", "bf16", 256, layout="contiguous")).measured


def test_the_backtest_predicts_each_measured_row_without_its_gpu():
    from finetune.estimate.perf import backtest

    results = backtest.run_measured()
    assert {r.row.id for r in results} == {r.id for r in measured.rows()}
    by_id = {r.row.id: r for r in results}
    # the H200's resident eager job, from the H100's rows and physics alone: 4,428 (+2.7 %)
    job = by_id["gpucheck-20261126-h200-resnet50-engine-resident-eager"]
    assert job.level == 2 and abs(job.error) < 0.10


@pytest.fixture(scope="module")
def dataset2k(tmp_path_factory):
    """Enough training images for one global batch of the measured 256 on an 8-GPU H200 host
    (p5en.48xlarge, the only H200 instance): 8 x 258 tiny ones, prepared at 224 px."""
    from finetune.data.datasets import prepare_folder
    from finetune.data.synth import SynthSpec, generate

    root = tmp_path_factory.mktemp("images") / "shapes"
    generate(root, SynthSpec(classes=8, per_class=260, min_side=16, max_side=20), workers=2)
    out = tmp_path_factory.mktemp("prepared") / "shapes"
    prepare_folder(root, out, "shapes", dict(train_per_class=258, resize=224), workers=2)
    return out


@pytest.mark.slow  # ~8 s on 2 shared cores: 2,080 images generated and prepared
def test_plan_says_measured_for_resnet50_on_an_h200(dataset2k, monkeypatch):
    monkeypatch.setenv("FINETUNE_REGION", "us-east-1")
    argv = ["plan", "caltech256-resnet50-torch", "batch_per_device=256", "--dataset",
            str(dataset2k), "--format", "json", "--max-hosts", "1"]  # fmt: skip
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout)["rows"] if r["gpu"] == "H200"]
    assert rows, "no H200 row in the plan"
    for r in rows:  # 'measured: 33731 img/s (band ...)': 8 GPUs x their efficiency x one's rate
        assert r["basis"].startswith("measured: "), r
        total = float(r["basis"].split()[1])
        per_device = total / (r["gpus"] * r["efficiency"])
        assert abs(per_device / H200_ENGINE_EAGER - 1) <= 0.10, r
