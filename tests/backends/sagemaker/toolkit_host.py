"""The SageMaker platform, played from a CreateTrainingJob request alone, around AWS's own
training toolkit (PyPI sagemaker-training + sagemaker-pytorch-training, what AWS's PyTorch
training images start with ``train``).

For each host the platform (as documented in "How Amazon SageMaker Provides Training
Information" and "Running Your Training Image") writes /opt/ml/input/config/*.json, copies each
channel's S3 objects to /opt/ml/input/data/CHANNEL, sets the request's Environment plus
TRAINING_JOB_NAME / TRAINING_JOB_ARN / SAGEMAKER_TRAINING_MODULE (the image's ENV), and runs
``train`` -- or, when the request names a ContainerEntrypoint (and ContainerArguments), that
instead of the image's own entrypoint, as SageMaker does. Here each host is a mount + UTS
namespace (``unshare -mu``; root): hostname algo-N, /etc/hosts naming every host on its own
127.0.0.x address, and /opt/ml a bind mount of a folder of the test's -- the machine's real
/opt and /etc are never written. The one change to the request: ``device`` "gpu" becomes "cpu"
(these hosts have no GPU; the toolkit then starts one process per host, as nvidia-smi is
absent). After the job, the platform's upload: algo-1's
/opt/ml/model as model.tar.gz under the request's S3OutputPath.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests import namespaces
from tests.aws.gateway import ACCOUNT, CONTAINER_KEY
from tests.namespaces import group  # noqa: F401 (the signal tests watch the group)

TOOLKIT_MODULE = "sagemaker_pytorch_container.training:main"
GROUP = "homogeneousCluster"


@dataclass
class Host:
    """One emulated instance: its name, loopback address and /opt/ml folder."""

    name: str
    address: str
    ml: Path


def hosts_for(request: dict, work: Path) -> list[Host]:
    count = request["ResourceConfig"]["InstanceCount"]
    return [
        Host(f"algo-{i}", f"127.0.0.{i + 1}", work / f"algo-{i}" / "ml")
        for i in range(1, count + 1)
    ]


def cpu_hyperparameters(request: dict) -> dict[str, str]:
    """The request's HyperParameters verbatim, but for device (no GPU on these hosts)."""
    hp = dict(request["HyperParameters"])
    assert hp["device"] == "gpu", hp  # what finetune sends for a GPU instance
    hp["device"] = "cpu"
    return hp


def write_config(request: dict, host: Host, hosts: list[Host], s3) -> None:
    """/opt/ml/input/config/*.json and the channels, as the platform writes them."""
    config = host.ml / "input" / "config"
    config.mkdir(parents=True)
    instance_type = request["ResourceConfig"]["InstanceType"]
    names = [h.name for h in hosts]
    files = {
        "hyperparameters.json": cpu_hyperparameters(request),
        "inputdataconfig.json": {
            c["ChannelName"]: {
                "TrainingInputMode": c.get("InputMode", "File"),
                "S3DistributionType": c["DataSource"]["S3DataSource"]["S3DataDistributionType"],
                "RecordWrapperType": c.get("RecordWrapperType", "None"),
                **({"ContentType": c["ContentType"]} if "ContentType" in c else {}),
            }
            for c in request["InputDataConfig"]
        },
        "resourceconfig.json": {
            "current_host": host.name,
            "current_instance_type": instance_type,
            "current_group_name": GROUP,
            "hosts": names,
            "instance_groups": [
                {"instance_group_name": GROUP, "instance_type": instance_type, "hosts": names}
            ],
            "network_interface_name": "eth0",
        },
    }
    if "CheckpointConfig" in request:
        files["checkpointconfig.json"] = {
            "LocalPath": request["CheckpointConfig"].get("LocalPath", "/opt/ml/checkpoints"),
            "S3Uri": request["CheckpointConfig"]["S3Uri"],
        }
    for name, doc in files.items():
        (config / name).write_text(json.dumps(doc))
    for channel in request["InputDataConfig"]:
        _copy_channel(s3, channel, host.ml / "input" / "data" / channel["ChannelName"])
    for sub in ("model", "output/data", "checkpoints", "code"):
        (host.ml / sub).mkdir(parents=True, exist_ok=True)


def _copy_channel(s3, channel: dict, dest: Path) -> None:
    source = channel["DataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix", source
    bucket, _, prefix = source["S3Uri"].removeprefix("s3://").partition("/")
    dest.mkdir(parents=True)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert keys, f"channel {channel['ChannelName']}: nothing under {source['S3Uri']}"
    for key in keys:
        rel = key[len(prefix) :].lstrip("/")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(dest / rel))


def environment(request: dict, host: Host, hosts: list[Host], work: Path, endpoint: str) -> dict:
    """The platform's environment for one host's ``train``."""
    region = request["_region"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FINETUNE_", "SM_"))}
    env.update(request.get("Environment", {}))
    env.update(
        TRAINING_JOB_NAME=request["TrainingJobName"],
        TRAINING_JOB_ARN=f"arn:aws:sagemaker:{region}:{ACCOUNT}:training-job/"
        + request["TrainingJobName"].lower(),
        SAGEMAKER_TRAINING_MODULE=TOOLKIT_MODULE,
        AWS_REGION=region,
        AWS_DEFAULT_REGION=region,
        AWS_ACCESS_KEY_ID=CONTAINER_KEY,  # the job's own credentials (the gateway tells them)
        AWS_SECRET_ACCESS_KEY="x",
        AWS_ENDPOINT_URL=endpoint,
        S3_ENDPOINT_URL=endpoint,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **namespaces.environment(host.name, work / "hosts", work, host.ml),
    )
    return env


def train_command() -> list[str]:
    """The image's ``train`` console script (beside our Python, as scripts/setup.sh installs
    it), else what that script runs (the toolkit installed with pip --target)."""
    script = Path(sys.executable).parent / "train"
    if script.exists():
        return [str(script)]
    return [
        sys.executable,
        "-c",
        "import sys; from sagemaker_training.cli.train import main; sys.exit(main())",
    ]


def host_command(request: dict) -> list[str]:
    """What the platform starts in the container: the request's ContainerEntrypoint (plus
    ContainerArguments) when it has one, else the image's entrypoint with ``train``."""
    spec = request["AlgorithmSpecification"]
    if spec.get("ContainerEntrypoint"):
        return [*spec["ContainerEntrypoint"], *spec.get("ContainerArguments", [])]
    return train_command()


def start(
    request: dict, work: Path, endpoint: str, s3, extra_env: dict | None = None, fresh: bool = True
) -> list[tuple[Host, subprocess.Popen]]:
    """Every host's ``train``, started in its own namespace (stdout+stderr to HOST.log), each
    the leader of its own process group. ``fresh=False``: a restart on the same hosts (a spot
    job's next attempt: SageMaker puts the checkpoints back, here they never left)."""
    hosts = hosts_for(request, work)
    namespaces.write_hosts(work / "hosts", [(h.name, h.address) for h in hosts])
    running = []
    for host in hosts:
        if fresh:
            write_config(request, host, hosts, s3)
        log = open(work / f"{host.name}.log", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(
            namespaces.command(host_command(request)),
            env={**environment(request, host, hosts, work, endpoint), **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        running.append((host, proc))
    return running


def wait(running, timeout: float) -> dict[str, tuple[int, str]]:
    """Each host's (exit code, log); a host still running after ``timeout`` is killed."""
    out = {}
    for host, proc in running:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            code = proc.wait()
        out[host.name] = (code, (host.ml.parent.parent / f"{host.name}.log").read_text())
    return out


def upload_model(request: dict, ml: Path, s3) -> str:
    """algo-1's /opt/ml/model as SageMaker uploads it: S3OutputPath/JOB/output/model.tar.gz.

    A gzip stream of stored (uncompressed) blocks: what reads it (tarfile's "r:gz", gzip) is
    the same for any level, and the model is 45 MB of float32 that deflate barely shrinks
    (41 MB at level 9): measured here, level 9 took 2.08 CPU-s to write and 0.33 to read
    back, level 0 0.09 and 0.13."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=0) as tar:
        for path in sorted((ml / "model").rglob("*")):
            tar.add(path, arcname=str(path.relative_to(ml / "model")), recursive=False)
    bucket, _, prefix = (
        request["OutputDataConfig"]["S3OutputPath"].removeprefix("s3://").partition("/")
    )
    key = f"{prefix.rstrip('/')}/{request['TrainingJobName']}/output/model.tar.gz".lstrip("/")
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    return f"s3://{bucket}/{key}"
