"""CloudWatch logs (incremental, several hosts) and metrics: the trainer's log lines while the
job runs, its metrics.jsonl from output.tar.gz once it ended."""

from __future__ import annotations

import contextlib
import io
import tarfile
import time

import boto3

from finetune import service
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.sagemaker.outputs import metrics_from_log
from finetune.contracts.metrics import EpochMetrics
from tests.aws import helpers as h
from tests.aws.conftest import BUCKET, REGION
from tests.aws.gateway import CONTAINER_KEY

GROUP = "/aws/sagemaker/TrainingJobs"


def _event(epoch: int, acc: float) -> EpochMetrics:
    return EpochMetrics(
        epoch=epoch,
        samples=80,
        samples_per_sec=812.5,
        epoch_seconds=0.1,
        train_loss=1.5,
        train_acc=acc,
        val_acc=acc,
        lr=0.04,
        devices=4,
    )


def container_client(service: str):
    """A client for what the training job itself writes (logs, outputs): the gateway tells
    its calls from finetune's by the access key."""
    return boto3.client(
        service, region_name=REGION, aws_access_key_id=CONTAINER_KEY, aws_secret_access_key="x"
    )


def _put_logs(job: str, host: str, lines: list[str]) -> None:
    logs = container_client("logs")
    exists = logs.exceptions.ResourceAlreadyExistsException
    with contextlib.suppress(exists):
        logs.create_log_group(logGroupName=GROUP)
    stream = f"{job}/{host}-1763790000"
    with contextlib.suppress(exists):
        logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
    now = int(time.time() * 1000)
    events = [{"timestamp": now + i, "message": m} for i, m in enumerate(lines)]
    logs.put_log_events(logGroupName=GROUP, logStreamName=stream, logEvents=events)


def _submitted(cloud, dataset, tmp_path, steps, hosts: int = 1):
    plan = h.sm_plan(dataset, hosts=hosts)
    ledger = h.ledger_at(tmp_path)
    be = SageMakerBackend(poll_seconds=0)
    run = service.submit(plan, be, ledger, ledger.create(h.new_run(tmp_path, plan)))
    job = run.backend_ref.rsplit("/", 1)[1]
    cloud.script(steps, job=job)
    return run, be, ledger, job


def test_logs_are_read_incrementally(cloud, tiny_dataset, tmp_path):
    run, be, _, job = _submitted(cloud, tiny_dataset, tmp_path, [])
    assert be.logs(run, 0) == ("", 0)  # no stream yet
    _put_logs(job, "algo-1", ["starting", "epoch 0 ..."])
    text, offset = be.logs(run, 0)
    assert text == "starting\nepoch 0 ...\n"
    _put_logs(job, "algo-1", ["done"])
    assert be.logs(run, offset) == ("done\n", offset + 5)
    # a fresh backend (another shell: `finetune runs logs`) reads everything from the start
    assert SageMakerBackend(poll_seconds=0).logs(run, 0)[0] == "starting\nepoch 0 ...\ndone\n"


def test_several_hosts_are_labelled(cloud, tiny_dataset, tmp_path):
    run, be, _, job = _submitted(cloud, tiny_dataset, tmp_path, [], hosts=2)
    _put_logs(job, "algo-1", ["one"])
    _put_logs(job, "algo-2", ["two"])
    text, _ = be.logs(run, 0)
    assert text.splitlines() == ["[algo-1] one", "[algo-2] two"]


def test_metrics_from_log_lines_while_training(cloud, tiny_dataset, tmp_path):
    steps = [h.step("InProgress", "Training", 90)]
    run, be, ledger, job = _submitted(cloud, tiny_dataset, tmp_path, steps)
    _put_logs(job, "algo-1", ["noise", _event(0, 0.25).log_line(), _event(1, 0.5).log_line()])
    run, status, epochs = service.sync(run, be, ledger)
    assert status.state == "running"
    assert [(e.epoch, e.train_acc, e.samples_per_sec) for e in epochs] == [
        (0, 0.25, 812.5),
        (1, 0.5, 812.5),
    ]
    assert [e.epoch for e in ledger.epochs(run.id)] == [0, 1]


def test_only_the_jobs_own_host_streams_are_read(cloud, tiny_dataset, tmp_path):
    """Another job's role (or anyone who may write the log group) can create streams under
    this job's prefix: their lines are neither shown nor counted as this job's metrics."""
    steps = [h.step("InProgress", "Training", 90)]
    run, be, ledger, job = _submitted(cloud, tiny_dataset, tmp_path, steps, hosts=2)
    _put_logs(job, "algo-1", ["one", _event(0, 0.25).log_line()])
    _put_logs(job, "algo-2", ["two"])
    forged = [_event(0, 0.99).log_line(), _event(1, 0.99).log_line(), "forged"]
    _put_logs(job, "algo-3", forged)  # a host this two-host job does not have
    _put_logs(job, "evil", forged)  # not SageMaker's JOB/algo-N-EPOCH shape
    _put_logs(f"{job}x", "algo-1", forged)  # another job whose name starts with this one's
    text, _ = be.logs(run, 0)
    assert text.splitlines() == [
        "[algo-1] one",
        f"[algo-1] {_event(0, 0.25).log_line()}",
        "[algo-2] two",
    ]
    _, _, epochs = service.sync(run, be, ledger)
    assert [(e.epoch, e.train_acc) for e in epochs] == [(0, 0.25)]


def test_metrics_file_from_the_output_wins_at_the_end(cloud, tiny_dataset, tmp_path):
    run, be, ledger, job = _submitted(cloud, tiny_dataset, tmp_path, h.ON_DEMAND[-1:])
    _put_logs(job, "algo-1", [_event(0, 0.1).log_line()])  # rounded, and incomplete
    events = [_event(0, 0.123456789), _event(1, 0.987654321)]
    _put_output(job, "".join(e.model_dump_json() + "\n" for e in events))
    run, status, epochs = service.sync(run, be, ledger)
    assert status.state == "completed"
    assert [e.train_acc for e in epochs] == [0.123456789, 0.987654321]
    kept = tmp_path / "runs" / run.id / "sagemaker" / f"{job}-metrics.jsonl"
    assert kept.is_file()  # fetched once, then read locally


def _put_output(job: str, metrics_text: str) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = metrics_text.encode()
        info = tarfile.TarInfo("metrics.jsonl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    key = f"finetune/output/{job}/output/output.tar.gz"
    container_client("s3").put_object(Bucket=BUCKET, Key=key, Body=buf.getvalue())


def test_metric_lines_parse_back_and_ignore_torn_ones():
    line = _event(3, 0.5).log_line()
    text = f"[algo-1] {line}\nfinetune-metrics epoch=4 samples=\nfinetune-metrics garbage\n"
    (event,) = metrics_from_log(text)
    assert event.epoch == 3 and event.devices == 4
