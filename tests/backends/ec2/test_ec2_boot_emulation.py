"""The EC2 bootstrap, executed: the user data of a torch run, as finetune sent it to moto in
RunInstances, booted by bash in an emulated instance (tests/backends/ec2/instance_host.py).

The dead-man timer is armed before anything else runs; our wheel comes from the run's S3
prefix and pip installs it into the stand-in DLAMI environment with no package index; the
agent starts the real trainer; checkpoints, metrics and the model land in the run's prefix on
moto; the instance powers off at the end (success or failure), which EC2 turns into its
termination (done here in moto); then `finetune runs show` and `finetune predict` read the
run back. Two instances train one model with torch DDP over gloo on loopback; a spot notice
from the fake IMDS stops an attempt, and the relaunched attempt's user data resumes it.
"""

from __future__ import annotations

import base64
import csv
import json
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

from . import instance_host
from .conftest import BUCKET, DLAMI, REGION, put_public_ssm_parameter, seed_dlami
from .control import OPEN_LEDGERS, instances_of
from .fake_imds import ROLE, FakeImds

pytest.importorskip("torch")
_WHY_NOT = namespaces.unshare_missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or "")]

TRAIN = ["schedule.steps=[]", "train.max_batches_per_epoch=3"]
LIVE = ["pending", "running", "stopping", "stopped"]


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The /opt/pytorch stand-in, made once per module."""
    return instance_host.make_standin(tmp_path_factory.mktemp("dlami"))


@pytest.fixture
def dlami(ec2_aws, monkeypatch):
    """moto with the PyTorch DLAMI published as AWS publishes it."""
    monkeypatch.delenv("FINETUNE_EC2_IMAGE")  # the torch engine needs no image of ours
    ami = seed_dlami(DLAMI.format("20261009"), "2026-10-09T00:00:00")
    put_public_ssm_parameter(ec2_ami.pytorch_parameter("x86_64"), ami)
    return ec2_aws


def _launch(dataset, hosts=1, epochs=1, spot=False, max_restarts=0):
    """A torch run launched into moto with the default ledger (the CLI reads it later).
    device=cpu: these instances have no GPU (the one departure from a g5 launch)."""
    res = Resources(backend="ec2", instance_type="g5.xlarge", hosts=hosts, device="cpu", spot=spot)
    plan = build_plan("smoke-resnet18-torch", dataset, res, [f"schedule.epochs={epochs}", *TRAIN])
    ledger = open_default()
    OPEN_LEDGERS.append(ledger)
    backend = Ec2Backend(Ec2Options(max_runtime=1800, max_restarts=max_restarts))
    return service.launch(plan, backend, ledger), backend, ledger


def _user_data(layer, n: int = -1) -> str:
    return base64.b64decode(layer.sent("RunInstances")[n]["UserData"]).decode()


def _instance(tmp_path, instance_id: str, k: int) -> instance_host.Instance:
    imds = FakeImds(instance_id).start()
    return instance_host.Instance(instance_id, f"127.0.0.{k + 2}", tmp_path / instance_id, imds)


def _powered_off(inst: instance_host.Instance, code: int, deadman_s: int) -> None:
    """Armed first, powered off last; then EC2 terminates it (terminate-on-shutdown)."""
    commands = [c for c in inst.commands() if not c.startswith("set ")]
    assert commands[0].startswith(f"systemd-run --on-active={deadman_s}s"), commands[:3]
    power = inst.power()
    assert power[0].startswith(f"systemd-run --on-active={deadman_s}s --unit=finetune-deadman")
    assert power[-1] == "systemctl poweroff", (code, power, inst.log[-3000:])
    inst.imds.stop()
    boto3.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[inst.instance_id])


def _s3_keys(prefix: str) -> list[str]:
    s3 = boto3.client("s3", region_name=REGION)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_the_user_data_boots_trains_and_powers_off(dlami, tiny_dataset, standin, tmp_path):
    opt_before = Path("/opt/finetune").exists()
    run, backend, ledger = _launch(tiny_dataset)
    inst = _instance(tmp_path, run.backend_ref, 0)
    instance_host.boot(_user_data(dlami), inst, standin)
    code = inst.wait(timeout=180)
    assert code == 0, inst.log[-4000:]
    _powered_off(inst, code, 1800 + 15 * 60)
    # the wheel came from S3 and went into the stand-in, not the machine's environment
    [installed] = list(standin.glob("lib/python3*/site-packages/finetune-*.dist-info"))
    assert (installed.parent / "finetune" / "backends" / "ec2" / "agent").is_dir()
    # the CLI and the agent signed with the instance role's credentials, read from IMDS
    assert [r for r in inst.imds.requests if r["path"].endswith(f"credentials/{ROLE}")]
    assert not Path("/opt/finetune").exists() or opt_before, "the real /opt was written"
    prefix = p.run_prefix(run.id)
    keys = _s3_keys(prefix)
    assert prefix + p.METRICS in keys and any("/model/" in k for k in keys), keys
    assert any(k.startswith(prefix + p.CHECKPOINTS) for k in keys), keys
    status = json.loads(
        boto3.client("s3", region_name=REGION)
        .get_object(Bucket=BUCKET, Key=prefix + p.STATUS)["Body"]
        .read()
    )
    assert status["state"] == "completed" and status["instance_id"] == inst.instance_id

    shown = CliRunner().invoke(app, ["runs", "show", run.id])
    assert shown.exit_code == 0, shown.output
    assert "completed" in shown.output
    assert instances_of(run.id, LIVE) == []
    labels = _val_images(tiny_dataset, tmp_path / "val")
    res = CliRunner().invoke(app, ["predict", run.id, str(tmp_path / "val"), "--format", "CSV"])
    assert res.exit_code == 0, res.output
    rows = [r for r in csv.DictReader(res.output.splitlines()) if r["rank"] == "1"]
    assert len(rows) == len(labels)


def _val_images(dataset, folder) -> list[int]:
    from finetune.data.recordio import RecordReader, unpack_header

    folder.mkdir()
    labels = []
    with RecordReader(dataset / "shapes_val.rec", dataset / "shapes_val.idx") as reader:
        for i, key in enumerate(reader.keys):
            header, payload = unpack_header(reader.read_key(key))
            (folder / f"{i:04d}.jpg").write_bytes(payload)
            labels.append(int(header.label))
    return labels
