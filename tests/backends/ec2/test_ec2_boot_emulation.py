"""The EC2 bootstrap, executed: the user data of a torch run, as finetune sent it to moto in
RunInstances, booted by bash in an emulated instance (tests/backends/ec2/instance_host.py).

The dead-man timer is armed before anything else runs; our wheel comes from the run's S3
prefix and pip installs it into the stand-in DLAMI environment with no package index; the
agent starts the real trainer; checkpoints, metrics and the model land in the run's prefix on
moto; the instance powers off at the end (success or failure), which EC2 turns into its
termination (done here in moto); then `finetune runs show` and `finetune predict` read the
run back. Two instances train one model with torch DDP over gloo on loopback; a spot notice
from the fake IMDS stops an attempt, and the relaunched attempt's user data resumes it. A wheel
or plan.json changed in the run's prefix after the launch is refused (sha256 in the user data).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import socket
import zipfile
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from finetune import service
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.backend import Ec2Backend
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.setup import ami as ec2_ami
from finetune.cli import app
from finetune.plan import Resources, build_plan
from finetune.runs.ledger import open_default
from tests import namespaces
from tests.valimages import val_images

from . import instance_host
from .agent_env import wait_for
from .conftest import BUCKET, DLAMI, REGION, put_public_ssm_parameter, seed_dlami
from .control import OPEN_LEDGERS, instances_of
from .fake_imds import ROLE, FakeImds

pytest.importorskip("torch")
_WHY_NOT = namespaces.unshare_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or "")]

# model.name: mobilenet_v3_small, not the recipe's resnet18 -- the model is not the point of
# these boots. A resnet18 checkpoint is 90 MB (weights + SGD momentum; mobilenet_v3_small:
# 12 MB), which every trainer saves and hashes, the agent uploads, moto (in the test process)
# stores and hashes, the relaunch downloads and `finetune predict` reads. Measured 2026-11-27 on
# the 2-core host, this module alone (-n 0, CPU-s of pytest + its children), two runs each:
# 118.8 / 100.3 before, 94.3 / 78.9 after (gloo 41.2 / 32.0 -> 29.8 / 24.9, spot notice
# 40.8 / 32.5 -> 28.5 / 23.9). The spot notice still lands mid-epoch (the trainer's step, not
# the model, sets how long it has: the notice came after batch 2 of 3 in the runs we read).
TRAIN = ["schedule.steps=[]", "train.max_batches_per_epoch=3", "model.name=mobilenet_v3_small"]
LIVE = ["pending", "running", "stopping", "stopped"]
BOOTED: list[instance_host.Instance] = []  # stopped by the dlami fixture
DEADMAN_S = 1800 + 15 * 60  # --max-runtime 30m plus the margin


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The /opt/pytorch stand-in, made once per module."""
    return instance_host.make_standin(tmp_path_factory.mktemp("dlami"))


@pytest.fixture
def dlami(ec2_aws, monkeypatch):
    """moto with the PyTorch DLAMI published as AWS publishes it; after the test, whatever
    a failed test left booting is killed and terminated."""
    monkeypatch.delenv("FINETUNE_EC2_IMAGE")  # the torch engine needs no image of ours
    ami = seed_dlami(DLAMI.format("20261009"), "2026-10-09T00:00:00")
    put_public_ssm_parameter(ec2_ami.framework_parameter("torch", "x86_64"), ami)
    yield ec2_aws
    ec2 = boto3.client("ec2", region_name=REGION)
    for inst in BOOTED:
        if inst.proc and inst.proc.poll() is None:
            os.killpg(inst.proc.pid, 9)
            inst.proc.wait()
        inst.imds.stop()
        ec2.terminate_instances(InstanceIds=[inst.instance_id])
    BOOTED.clear()


def _launch(dataset, hosts=1, epochs=1, spot=False, max_restarts=0, overrides=()):
    """A torch run launched into moto with the default ledger (the CLI reads it later).
    device=cpu: these instances have no GPU (the one departure from a g5 launch, besides
    TRAIN's small workload and model)."""
    res = Resources(backend="ec2", instance_type="g5.xlarge", hosts=hosts, device="cpu", spot=spot)
    overrides = [f"schedule.epochs={epochs}", *TRAIN, *overrides]
    plan = build_plan("smoke-resnet18-torch", dataset, res, overrides)
    ledger = open_default()
    OPEN_LEDGERS.append(ledger)
    backend = Ec2Backend(Ec2Options(max_runtime=1800, max_restarts=max_restarts))
    return service.launch(plan, backend, ledger), backend, ledger


def _user_data(layer, n: int = -1) -> str:
    return base64.b64decode(layer.sent("RunInstances")[n]["UserData"]).decode()


def _instance(tmp_path, instance_id: str, k: int) -> instance_host.Instance:
    imds = FakeImds(instance_id, vpc_cidrs="127.0.0.0/8").start()  # the VPC is loopback here
    return instance_host.Instance(instance_id, f"127.0.0.{k + 2}", tmp_path / instance_id, imds)


def _boot(layer, tmp_path, standin, instance_id, k=0, n=-1, **kw) -> instance_host.Instance:
    """The ``n``-th RunInstances' user data booted as ``instance_id`` at 127.0.0.(k+2)."""
    inst = _instance(tmp_path, instance_id, k)
    BOOTED.append(inst)
    return instance_host.boot(_user_data(layer, n), inst, standin, **kw)


def _powered_off(inst: instance_host.Instance) -> None:
    """Armed first, powered off last; then EC2 terminates it (terminate-on-shutdown)."""
    armed = f"systemd-run --on-active={DEADMAN_S}s --unit=finetune-deadman"
    commands = [c for c in inst.commands() if not c.startswith("set ")]
    assert commands[0].startswith(armed), commands[:3]  # before anything else ran
    power = inst.power()
    assert power[0].startswith(armed) and power[-1] == "systemctl poweroff", (power, inst.log)
    boto3.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[inst.instance_id])


def _s3_keys(prefix: str) -> list[str]:
    s3 = boto3.client("s3", region_name=REGION)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _s3_json(key: str) -> dict:
    s3 = boto3.client("s3", region_name=REGION)
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def _cli(*args) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def _predicts(run_id: str, dataset, folder) -> None:
    """`finetune predict` with the run's model: one top-1 per validation image."""
    labels = val_images(dataset, folder)
    out = _cli("predict", run_id, str(folder), "--format", "CSV")
    rows = [r for r in csv.DictReader(out.splitlines()) if r["rank"] == "1"]
    classes = len(json.loads((dataset / "manifest.json").read_text())["classes"])
    assert len(rows) == len(labels) and all(0 <= int(r["label"]) < classes for r in rows)


def test_the_user_data_boots_trains_and_powers_off(dlami, tiny_dataset, standin, tmp_path):
    opt_before = Path("/opt/finetune").exists()
    run, _, _ = _launch(tiny_dataset, overrides=["metric_logging.loggers=[tensorboard]"])
    inst = _boot(dlami, tmp_path, standin, run.backend_ref)
    assert inst.wait(timeout=240) == 0, inst.log[-4000:]
    _powered_off(inst)
    # the recipe names a metric logger: its packages' hashed list, from the wheel, after the
    # base install (here every one is in the stand-in already: pip, with no index, accepts it)
    pips = [c for c in inst.commands() if c.startswith("/opt/pytorch/bin/python -m pip install")]
    assert len(pips) == 2 and pips[1].endswith("--requirement /opt/finetune/metrics.txt"), pips
    assert "without metric loggers" not in inst.log
    train_log = (inst.ml / "output" / "train.log").read_text()
    assert "finetune-warning" not in train_log, train_log[-3000:]
    # the wheel came from S3 and went into the stand-in, not the machine's environment
    [installed] = list(standin.glob("lib/python3*/site-packages/finetune-*.dist-info"))
    assert (installed.parent / "finetune" / "backends" / "ec2" / "agent").is_dir()
    assert Path("/opt/finetune").exists() == opt_before, "the real /opt was written"
    # the CLI and the agent signed with the instance role's credentials, read from IMDS
    assert [r for r in inst.imds.requests if r["path"].endswith(f"credentials/{ROLE}")]
    prefix = p.run_prefix(run.id)
    keys = _s3_keys(prefix)
    assert prefix + p.METRICS in keys and any(k.startswith(prefix + p.MODEL) for k in keys)
    assert any(k.startswith(prefix + p.CHECKPOINTS) for k in keys), keys
    assert any(k.startswith(prefix + p.TENSORBOARD + "events.out.tfevents.") for k in keys), keys
    status = _s3_json(prefix + p.STATUS)
    assert status["state"] == "completed" and status["instance_id"] == inst.instance_id
    assert "completed" in _cli("runs", "show", run.id)
    assert instances_of(run.id, LIVE) == []
    _predicts(run.id, tiny_dataset, tmp_path / "val")


def test_a_boot_that_fails_still_powers_off(dlami, tiny_dataset, standin, tmp_path):
    run, _, _ = _launch(tiny_dataset)
    state = json.loads((Path(run.run_dir) / "ec2.json").read_text())
    s3 = boto3.client("s3", region_name=REGION)
    _, dataset_prefix = p.split_s3_uri(state["dataset_uri"])
    for key in _s3_keys(dataset_prefix):  # the dataset is gone: the agent cannot start
        s3.delete_object(Bucket=BUCKET, Key=key)
    inst = _boot(dlami, tmp_path, standin, run.backend_ref)
    assert inst.wait(timeout=240) == p.EXIT_FAILED, inst.log[-4000:]
    _powered_off(inst)
    assert "agent exited with code 1; powering off" in inst.log
    status = _s3_json(p.run_prefix(run.id) + p.STATUS)
    assert status["state"] == "failed" and "cannot download" in status["reason"]
    assert "failed" in _cli("runs", "show", run.id)


def test_a_spot_notice_checkpoints_powers_off_and_the_next_boot_resumes(
    dlami, tiny_dataset, standin, tmp_path
):
    # two epochs: the notice comes at the first one's first batch, so the relaunch resumes
    # mid-epoch and still trains a whole epoch after it
    run, _, _ = _launch(tiny_dataset, epochs=2, spot=True, max_restarts=1)
    fast_polls = {"FINETUNE_AGENT_POLL_INTERVAL": "0.2"}  # the agent's default is 5 s
    # a progress line after every batch (else one every 2 s: a fast first batch says nothing)
    fast_polls["FINETUNE_LOG_EVERY"] = "1"
    first = _boot(dlami, tmp_path, standin, run.backend_ref, extra_env=fast_polls)
    log = first.ml / "output" / "train.log"
    wait_for(lambda: log.exists() and "finetune-progress epoch=0 batch=1/" in log.read_text(), 180)
    first.imds.schedule_notice()
    assert first.wait(timeout=180) == p.EXIT_INTERRUPTED, first.log[-4000:]
    _powered_off(first)
    assert any("/COMPLETE" in k for k in _s3_keys(p.run_prefix(run.id) + p.CHECKPOINTS))
    assert "submitted" in _cli("runs", "show", run.id)  # EC2 took it back: relaunched
    [second_id] = [i["InstanceId"] for i in instances_of(run.id, LIVE)]
    second = _boot(dlami, tmp_path, standin, second_id, k=1, extra_env=fast_polls)
    assert second.wait(timeout=240) == 0, second.log[-4000:]
    _powered_off(second)
    assert "ATTEMPT=2" in _user_data(dlami)
    train_log = (second.ml / "output" / "train.log").read_text()
    assert "finetune-resume checkpoint=" in train_log
    epochs = [json.loads(x)["epoch"] for x in _s3_text(p.run_prefix(run.id) + p.METRICS)]
    assert epochs == [0, 1]
    assert "completed" in _cli("runs", "show", run.id)
    _predicts(run.id, tiny_dataset, tmp_path / "val")


def test_two_instances_train_one_model_over_gloo(dlami, tiny_dataset, standin, tmp_path):
    run, _, _ = _launch(tiny_dataset, hosts=2)
    prefix = p.run_prefix(run.id)
    doc = _s3_json(prefix + p.HOSTS)
    # the VPC's private addresses become loopback ones: 127.0.0.2 for algo-1, ...
    order = sorted(doc["instances"], key=lambda i: doc["instances"][i])
    doc["hosts"] = {doc["instances"][i]: f"127.0.0.{k + 2}" for k, i in enumerate(order)}
    boto3.client("s3", region_name=REGION).put_object(
        Bucket=BUCKET, Key=prefix + p.HOSTS, Body=json.dumps(doc).encode()
    )
    port = {"FINETUNE_TORCHRUN_PORT": str(_free_port())}
    names = [(f"ip-127-0-0-{k + 2}", f"127.0.0.{k + 2}") for k in range(2)]
    booted = [
        _boot(dlami, tmp_path, standin, i, k=k, hosts=names, extra_env=port)
        for k, i in enumerate(order)
    ]
    codes = [inst.wait(timeout=300) for inst in booted]
    assert codes == [0, 0], [inst.log[-3000:] for inst in booted]
    for inst in booted:
        _powered_off(inst)
    first_log = (booted[0].ml / "output" / "train.log").read_text()
    assert "hosts=2" in first_log and "training complete: 1 epoch(s)" in first_log
    assert not any((booted[1].ml / "model").iterdir())  # one model: the first host's
    assert "completed" in _cli("runs", "show", run.id)
    _predicts(run.id, tiny_dataset, tmp_path / "val")


def _s3_text(key: str) -> list[str]:
    s3 = boto3.client("s3", region_name=REGION)
    return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode().splitlines()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_wheel_changed_after_the_launch_is_refused_and_the_instance_powers_off(
    dlami, tiny_dataset, standin, tmp_path
):
    """The run's role may write its own prefix: a wheel replaced there never reaches pip."""
    run, _, _ = _launch(tiny_dataset)
    s3 = boto3.client("s3", region_name=REGION)
    [key] = [k for k in _s3_keys(p.run_prefix(run.id) + "code/") if k.endswith(".whl")]
    planted = _planted(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    s3.put_object(Bucket=BUCKET, Key=key, Body=planted)
    inst = _boot(dlami, tmp_path, standin, run.backend_ref)
    assert inst.wait(timeout=240) == 1, inst.log[-4000:]
    _powered_off(inst)
    found = hashlib.sha256(planted).hexdigest()
    assert f"refusing s3://{BUCKET}/{key}: its sha256 is {found}, not the" in inst.log
    assert not [c for c in inst.commands() if "pip install" in c or "ec2.agent" in c]


def _planted(wheel: bytes) -> bytes:
    """The same wheel, but its agent only says it ran (and reports success)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "finetune/backends/ec2/agent/__main__.py":
                data = b"print('planted agent ran')\n"
            dst.writestr(info, data)
    return out.getvalue()


def test_a_plan_changed_after_the_launch_is_refused_by_the_agent(
    dlami, tiny_dataset, standin, tmp_path
):
    run, _, _ = _launch(tiny_dataset)
    key = p.run_prefix(run.id) + p.PLAN
    plan = _s3_json(key)
    plan["recipe"]["schedule"]["epochs"] = 500  # someone else's idea of this run
    boto3.client("s3", region_name=REGION).put_object(
        Bucket=BUCKET, Key=key, Body=json.dumps(plan).encode()
    )
    inst = _boot(dlami, tmp_path, standin, run.backend_ref)
    assert inst.wait(timeout=240) == p.EXIT_FAILED, inst.log[-4000:]
    _powered_off(inst)
    status = _s3_json(p.run_prefix(run.id) + p.STATUS)
    assert status["state"] == "failed" and f"refusing s3://{BUCKET}/{key}" in status["reason"]
    assert "the launch recorded (it was changed after the launch)" in status["reason"]
    assert not (inst.ml / "input" / "config").exists()  # nothing laid out from it
