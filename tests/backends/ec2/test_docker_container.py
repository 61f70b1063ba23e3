"""The EC2 + MXNet path executed for real: the Docker user data of an MXNet run, as finetune sent
it to moto in RunInstances, booted by bash in an emulated instance (instance_host.py), runs its
`docker run` line against a real container runtime (tests/containerhost.py: podman 4.3 + runc
behind the docker CLI) with the training image built from the project's Dockerfile. The
image's real entrypoint is overridden by the line itself; the agent starts as uid 1000, reaches
the emulated AWS, starts the trainer; `docker stop` sends SIGTERM, which reaches the trainer
long before the stop timeout: checkpoint uploaded, "interrupted", exit 75, powered off.

The instance's docker is the docker CLI behind a thin script on the instance's PATH (DOCKER):
- it talks to the instance's own podman service, started on first use inside the instance's
  mount namespace (as dockerd runs on the AMI), so `--volume /opt/ml:/opt/ml` is the instance's;
- the emulated ECR: `login` takes the password moto issued, `pull` finds the image this
  machine built under its ECR name and digest (moto's ECR records that digest);
- `run`: what AWS's network gives a real container is this machine's loopback here: moto and
  the fake IMDS listen on 127.0.0.1, so the bridge becomes the host network and the endpoints
  come in as --env. `--gpus all` goes through as written: podman 4.3's API ignores it (no GPU).
Every call's arguments are recorded before anything is changed: the test reads them back.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import boto3
import pytest

from finetune import service
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.backend import Ec2Backend
from finetune.backends.ec2.options import Ec2Options
from finetune.plan import Resources, build_plan
from finetune.runs.ledger import open_default
from tests import containerhost, namespaces

from . import instance_host
from .agent_env import wait_for
from .conftest import BUCKET, IMAGE, REGION
from .control import OPEN_LEDGERS
from .fake_imds import ROLE, FakeImds

_WHY_NOT = namespaces.unshare_missing() or containerhost.runtime_missing()
pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,
    pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or ""),
]

DOCKER = r"""#!/bin/bash
set -euo pipefail
n=$(find "$EMU_DOCKER_LOG" -maxdepth 1 -type f | wc -l)
printf '%s\0' "$@" > "$EMU_DOCKER_LOG/$n"
export DOCKER_HOST="unix://$EMU_DOCKER_SOCK"
if ! "$EMU_DOCKER" version >/dev/null 2>&1; then
  podman system service --time=0 "$DOCKER_HOST" >> "$EMU_DOCKER_SERVICE_LOG" 2>&1 < /dev/null &
  for _ in $(seq 300); do "$EMU_DOCKER" version >/dev/null 2>&1 && break; sleep 0.1; done
fi
case "${1:-}" in
  login) cat > /dev/null; exit 0 ;;
  pull) exec "$EMU_DOCKER" image inspect --format '{{.Id}}' "${@: -1}" ;;
  run)
    shift
    args=() prev=
    for a in "$@"; do
      [[ "$prev" == --network && "$a" == bridge ]] && a=host
      args+=("$a") prev=$a
    done
    envs=()
    while IFS= read -r kv; do [[ -n "$kv" ]] && envs+=(--env "$kv"); done <<< "$EMU_CONTAINER_ENV"
    exec "$EMU_DOCKER" run "${envs[@]}" "${args[@]}" ;;
esac
exec "$EMU_DOCKER" "$@"
"""
CONTAINER = "finetune-agent"  # the name the user data gives it
UID = 1000  # the image's user (Dockerfile), the user data's --user


@pytest.fixture
def ecr_image(ec2_aws, training_image):
    """The built image as a launch finds it in ECR: moto's tag points at the local image's
    digest, and the local image carries the ECR name; yields the name@digest a launch pins."""
    inspect = ["podman", "image", "inspect", "--format", "{{.Digest}}", training_image]
    digest = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"digest": digest},
    }  # (moto records the digest given)
    boto3.client("ecr", region_name=REGION).put_image(
        repositoryName="finetune",
        imageManifest=json.dumps(manifest),
        imageTag=IMAGE.rsplit(":", 1)[1],
        imageDigest=digest,
    )
    containerhost.docker("tag", training_image, IMAGE)
    yield f"{IMAGE.rsplit(':', 1)[0]}@{digest}"
    subprocess.run(["podman", "untag", training_image, IMAGE], capture_output=True)


@pytest.fixture
def booted():
    """Instances booted by the test; afterwards each one's processes (its podman service
    among them) are stopped and its container removed."""
    started: list[instance_host.Instance] = []
    yield started
    for inst in started:
        if inst.proc:
            for pid in namespaces.group(inst.proc.pid):
                os.kill(pid, signal.SIGTERM)
            wait_for(lambda inst=inst: not namespaces.group(inst.proc.pid), 30, 0.1)
            if inst.proc.poll() is None:
                inst.proc.wait()
        inst.imds.stop()
        containerhost.remove(CONTAINER)
        # (EC2 terminates an instance that powered off; one that failed earlier too)
        boto3.client("ec2", region_name=REGION).terminate_instances(InstanceIds=[inst.instance_id])


def _launch(dataset, epochs: int):
    """An MXNet run launched into moto (device=cpu: no GPU here, the one departure)."""
    res = Resources(backend="ec2", instance_type="g5.xlarge", hosts=1, device="cpu")
    overrides = [f"schedule.epochs={epochs}", "schedule.steps=[]"]
    plan = build_plan("smoke-resnet18", dataset, res, overrides)
    assert plan.hyperparameters.engine == "mxnet"
    ledger = open_default()
    OPEN_LEDGERS.append(ledger)
    return service.launch(plan, Ec2Backend(Ec2Options(max_runtime=1800)), ledger)


def _boot(layer, tmp_path: Path, instance_id: str, booted: list) -> instance_host.Instance:
    user_data = base64.b64decode(layer.sent("RunInstances")[-1]["UserData"]).decode()
    imds = FakeImds(instance_id).start()
    inst = instance_host.Instance(instance_id, "127.0.0.2", tmp_path / instance_id, imds)
    booted.append(inst)
    stubs = inst.root / "stubs"
    stubs.mkdir(parents=True)
    (stubs / "docker").write_text(DOCKER)
    (stubs / "docker").chmod(0o755)
    (inst.root / "docker-calls").mkdir()
    endpoints = {
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url + "/",
        "FINETUNE_AGENT_IMDS": imds.url,
        "FINETUNE_LOG_EVERY": "1",  # a progress line after every batch
    }
    env = {
        "EMU_DOCKER": "/usr/local/bin/docker"
        if Path("/usr/local/bin/docker").exists()
        else "/usr/bin/docker",
        "EMU_DOCKER_SOCK": str(inst.root / "docker.sock"),
        "EMU_DOCKER_LOG": str(inst.root / "docker-calls"),
        "EMU_DOCKER_SERVICE_LOG": str(inst.root / "podman-service.log"),
        "EMU_CONTAINER_ENV": "\n".join(f"{k}={v}" for k, v in endpoints.items()),
        "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", ""),
    }
    return instance_host.boot(user_data, inst, None, extra_env=env)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _calls(inst: instance_host.Instance) -> list[list[str]]:
    """The instance's docker calls, in order, each as the argument list it was given."""
    files = sorted(inst.root.joinpath("docker-calls").iterdir(), key=lambda f: int(f.name))
    return [f.read_bytes().decode().split("\0")[:-1] for f in files]


def test_the_docker_user_data_starts_the_agent_and_docker_stop_checkpoints_and_uploads(
    ec2_aws, ecr_image, tiny_dataset, tmp_path, booted
):
    run = _launch(tiny_dataset, epochs=200)
    inst = _boot(ec2_aws, tmp_path, run.backend_ref, booted)
    log = inst.ml / "output" / "train.log"

    def training() -> bool:  # (or the user data ended: no need to wait any longer)
        return "finetune-progress epoch=0 batch=1/" in _text(log) or inst.proc.poll() is not None

    wait_for(training, 240, 0.2)
    assert inst.proc.poll() is None, inst.log[-5000:]
    # the line as rendered: the image the launch pinned by digest, its own entrypoint
    # replaced, the image's unprivileged user, and the GPUs asked for
    run_args = next(c for c in _calls(inst) if c[0] == "run")
    assert run_args[-3:] == [ecr_image, "-m", "finetune.backends.ec2.agent"], run_args
    words = " ".join(run_args)
    for flag in ("--user 1000:1000", "--entrypoint python", "--gpus all", "--network bridge",
                 "--stop-timeout 110", "--volume /opt/ml:/opt/ml", "--cap-drop ALL",
                 "--security-opt no-new-privileges"):  # fmt: skip
        assert flag in words, run_args
    assert [c[0] for c in _calls(inst)][:2] == ["login", "pull"]
    # the agent reached the emulated AWS: the instance role's credentials from IMDS, and
    # the dataset from S3 into the tree the host gave uid 1000
    assert [r for r in inst.imds.requests if r["path"].endswith(f"credentials/{ROLE}")]
    data = inst.ml / "input" / "data" / "train"
    assert any(data.iterdir()) and all(f.lstat().st_uid == UID for f in data.iterdir())
    assert log.stat().st_uid == UID
    # the runtime applied them (issue 49, S5-7): no capability, no privilege to gain
    seen = subprocess.run(
        ["docker", "exec", CONTAINER, "cat", "/proc/self/status"],
        env={**os.environ, "DOCKER_HOST": f"unix://{inst.root / 'docker.sock'}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    fields = dict(line.split(":", 1) for line in seen.stdout.splitlines() if ":" in line)
    assert fields["NoNewPrivs"].strip() == "1", seen.stdout + seen.stderr
    assert int(fields["CapBnd"], 16) == 0 and int(fields["CapEff"], 16) == 0, seen.stdout
    assert fields["Uid"].split()[0] == str(UID)
    started = time.monotonic()
    stop = subprocess.run(
        ["docker", "stop", CONTAINER],
        env={**os.environ, "DOCKER_HOST": f"unix://{inst.root / 'docker.sock'}"},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert stop.returncode == 0, stop.stderr
    # the SIGTERM did it: the runtime's SIGKILL would come after the 110 s stop timeout (137)
    assert time.monotonic() - started < 110
    code = inst.wait(timeout=60)
    assert code == p.EXIT_INTERRUPTED, inst.log[-5000:]
    train_log = log.read_text()
    assert "stopped by SIGTERM, checkpoint saved" in train_log, train_log[-3000:]
    assert "agent exited with code 75; powering off" in inst.log
    assert inst.power()[-1] == "systemctl poweroff"
    prefix = p.run_prefix(run.id)
    s3 = boto3.client("s3", region_name=REGION)
    status = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + p.STATUS)["Body"].read())
    assert status["state"] == p.INTERRUPTED and status["instance_id"] == inst.instance_id
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    assert any(k.startswith(prefix + p.CHECKPOINTS) and k.endswith("/COMPLETE") for k in keys), keys
