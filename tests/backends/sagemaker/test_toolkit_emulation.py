"""A torch job as finetune sends it to SageMaker, run by AWS's own training toolkit.

`finetune launch --backend sagemaker` against moto; the CreateTrainingJob request it sent is
the only input of the platform played in tests/backends/sagemaker/toolkit_host.py (config
files, channels copied from S3, environment, ``train`` in a mount + UTS namespace per host).
One instance: the toolkit runs our program, which trains in-process. Two instances: the
toolkit's torch_distributed launcher runs torchrun on each host (gloo on CPU, over 127.0.0.x).
Then the model goes to S3 as SageMaker uploads it, the job is marked Completed, and
`finetune runs show` and `finetune predict` read the run back: predict's top-1 on the
validation images is exactly what the job recorded at its best epoch.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tarfile

import boto3
import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.contracts.metrics import LOG_PREFIX
from finetune.runs.ledger import open_default
from tests import namespaces
from tests.aws import helpers as h
from tests.aws.conftest import REGION
from tests.aws.gateway import CONTAINER_KEY, moto_job
from tests.valimages import val_images

from . import toolkit_host

pytest.importorskip("torch")
pytest.importorskip(
    "sagemaker_pytorch_container", reason="AWS's training toolkit (dev extra; scripts/setup.sh)"
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare"),
]


def _namespaces_work() -> bool:
    return namespaces.unshare_missing() is None


def _container_s3():
    return boto3.client(
        "s3", region_name=REGION, aws_access_key_id=CONTAINER_KEY, aws_secret_access_key="x"
    )


# the recipe's resnet18 swapped for mobilenet_v3_small: the network is not what these jobs
# test, and resnet18's model (45 MB) and checkpoints (90 MB) are what every host writes and
# hashes, gloo all-reduces each step (two hosts), the harness uploads through moto's S3 and
# predict reads back (tests/backends/ec2/test_ec2_boot_emulation.py: TRAIN, measured there)
MODEL = "mobilenet_v3_small"


def _launch(
    cloud, dataset, instance: str, count: int, spot=False, epochs=1, batches=4, model=MODEL
) -> tuple[str, dict]:
    """(run id, the CreateTrainingJob request as sent) of a CLI launch: ``epochs`` epochs of
    ``batches`` batches, a constant rate, ``model``."""
    args = ["launch", "smoke-resnet18-torch", f"schedule.epochs={epochs}", "schedule.steps=[]"]
    args += [f"train.max_batches_per_epoch={batches}", f"model.name={model}"]
    args += ["--backend", "sagemaker", "--dataset", str(dataset), "--instance", instance]
    args += ["--count", str(count), *(["--spot"] if spot else [])]
    res = CliRunner().invoke(app, [*args, "--detach"])
    assert res.exit_code == 0, res.output
    (call,) = cloud.requests("CreateTrainingJob")
    with open_default() as ledger:
        (run,) = ledger.list()
    return run.id, {**call.json, "_region": REGION}


def _complete(request: dict, seconds: int) -> None:
    """The job's end in moto's backend, as SageMaker reports it after the upload."""
    from tests.aws.gateway import apply_step

    job = moto_job(request["TrainingJobName"], REGION)
    apply_step(job, {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Training"}, True)
    end = h.step("Completed", "Completed", seconds, "Training job completed")
    apply_step(job, {**end, "TrainingTimeInSeconds": seconds, "BillableTimeInSeconds": seconds})


def _run_job(cloud, request: dict, work) -> dict[str, tuple[int, str]]:
    running = toolkit_host.start(request, work, cloud_endpoint(), _container_s3())
    return toolkit_host.wait(running, timeout=240)


def cloud_endpoint() -> str:
    """The gateway in front of moto (the cloud fixture set it)."""
    return os.environ["AWS_ENDPOINT_URL"]


@pytest.mark.parametrize("hosts", [1, 2])
def test_the_toolkit_trains_our_request_and_finetune_reads_it_back(
    cloud, tiny_dataset, tmp_path, hosts
):
    if not _namespaces_work():
        pytest.skip("mount + UTS namespaces need root (unshare -mu)")
    # two batches, not four: the amount is not the point here (one epoch, one metric
    # line, the model predict reads back), and every batch costs each host a step (DDP over
    # gloo with two hosts); the other tests keep _launch's four
    run_id, request = _launch(cloud, tiny_dataset, "g5.xlarge", hosts, batches=2)
    ran = _run_job(cloud, request, tmp_path / "job")
    for name, (code, log) in ran.items():  # the FailureReason SageMaker would show, first
        failure = tmp_path / "job" / name / "ml" / "output" / "failure"
        reason = failure.read_text() if failure.exists() else "(no failure file)"
        assert code == 0, f"{name} exited {code}: {reason}\n{log[-3000:]}"
    first_log = ran["algo-1"][1]
    if hosts > 1:  # the toolkit's torch_distributed launcher: torchrun on every host
        assert "Invoking TorchDistributed" in first_log and "torchrun" in first_log
    else:  # one process: ours, which trains in-process (one device)
        assert "Invoking TorchDistributed" not in first_log
    assert "training complete: 1 epoch(s)" in first_log
    assert "finetune: source directory s3://" in first_log  # codecheck.py ran first
    # SageMaker's metric regexes read every host's log: only the validating host prints them
    metric_lines = {
        n: [x for x in log.splitlines() if LOG_PREFIX in x] for n, (_, log) in ran.items()
    }
    assert len(metric_lines["algo-1"]) == 1  # one epoch, said once
    assert all(not lines for n, lines in metric_lines.items() if n != "algo-1"), metric_lines
    ml = tmp_path / "job" / "algo-1" / "ml"
    assert (ml / "model").is_dir() and any((ml / "model").iterdir())
    if hosts > 1:
        assert not any((tmp_path / "job" / "algo-2" / "ml" / "model").iterdir())

    toolkit_host.upload_model(request, ml, _container_s3())
    _complete(request, seconds=90)
    shown = CliRunner().invoke(app, ["runs", "show", run_id])
    assert shown.exit_code == 0, shown.output
    assert "completed" in shown.output

    labels = val_images(tiny_dataset, tmp_path / "val")
    res = CliRunner().invoke(app, ["predict", run_id, str(tmp_path / "val"), "--format", "CSV"])
    assert res.exit_code == 0, res.output
    top1 = [int(r["label"]) for r in csv.DictReader(res.output.splitlines()) if r["rank"] == "1"]
    out = ml / "output" / "data"
    report = json.loads((out / "val-report.json").read_text())
    with open(out / "predictions" / f"val-epoch-{report['epoch']:03d}.csv", newline="") as f:
        recorded = [int(r["top1"]) for r in csv.DictReader(f)]
    assert top1 == recorded  # image by image
    hits = sum(p == t for p, t in zip(top1, labels, strict=True))
    assert (hits, len(labels)) == (round(report["accuracy"] * report["count"]), report["count"])


def test_a_replaced_source_directory_is_refused_before_any_of_it_runs(
    cloud, tiny_dataset, tmp_path
):
    """Issue 23 #5: another SageMaker caller overwrites the run's tar.gz in S3 after the launch
    (its own finetune_entry.py, requirements.txt and package). The job stops before the
    toolkit installs or runs anything from it, and says why."""
    if not _namespaces_work():
        pytest.skip("mount + UTS namespaces need root (unshare -mu)")
    _, request = _launch(cloud, tiny_dataset, "g5.xlarge", 1)
    uri = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = uri[len("s3://") :].split("/", 1)
    hostile = io.BytesIO()
    evil = b"import pathlib; pathlib.Path('/opt/ml/PWNED').write_text('ran')\n"
    with tarfile.open(fileobj=hostile, mode="w:gz") as tar:
        for name, data in (("finetune_entry.py", evil), ("requirements.txt", b"pwned-pkg\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _container_s3().put_object(Bucket=bucket, Key=key, Body=hostile.getvalue())

    ran = _run_job(cloud, request, tmp_path / "job")
    code, log = ran["algo-1"]
    ml = tmp_path / "job" / "algo-1" / "ml"
    assert code != 0, log[-3000:]
    failure = (ml / "output" / "failure").read_text()
    assert f"the job's source directory {uri} is not the one finetune launched" in failure
    assert "To fix: launch the run again" in failure and failure in log
    assert not (ml / "PWNED").exists()  # the replaced entry never ran
    assert not any((ml / "code").iterdir())  # nothing of it was unpacked
    assert "pwned-pkg" not in log  # nor its requirements handed to pip
