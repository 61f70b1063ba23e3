"""Helpers of the agent tests: a run's S3 prefix filled as `launch` fills it, and the agent
started as a subprocess against moto S3 and the fake IMDS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from finetune.backends.ec2.agent import protocol as p

from .conftest import BUCKET, REGION

STANDIN = Path(__file__).with_name("standin_trainer.py")


def make_plan(dataset: Path, *overrides: str):
    from finetune.plan import Resources, build_plan

    resources = Resources(backend="ec2", instance_type="g5.xlarge", device="cpu")
    return build_plan("smoke-resnet18", dataset, resources, overrides)


def fill_prefix(plan, run_id: str) -> dict:
    """Dataset and plan.json in moto S3; returns the agent's environment for this run."""
    import boto3

    from finetune.aws.s3upload import plan_upload, upload_dataset

    s3 = boto3.client("s3", region_name=REGION)
    upload = plan_upload(plan.dataset.path, BUCKET)
    upload_dataset(s3, upload)
    prefix = p.run_prefix(run_id)
    s3.put_object(Bucket=BUCKET, Key=prefix + p.PLAN, Body=plan.to_json().encode())
    return {p.ENV_BUCKET: BUCKET, p.ENV_PREFIX: prefix, p.ENV_DATASET: upload.uri}


def start_agent(
    base: dict, ml_root: Path, imds_url: str, attempt: int = 1, **env
) -> subprocess.Popen:
    full = dict(os.environ, **base)
    full.update(
        {
            "FINETUNE_ML_ROOT": str(ml_root),
            p.ENV_ATTEMPT: str(attempt),
            p.ENV_IMDS: imds_url,
            p.ENV_INTERVAL: "0.3",
            p.ENV_POLL: "0.1",
            p.ENV_GRACE: "60",
            p.ENV_TRAINER: f"{sys.executable} {STANDIN}",
            p.ENV_SHUTDOWN: f"touch {ml_root.parent / f'shutdown-{attempt}'}",
            "AWS_DEFAULT_REGION": REGION,
        }
    )
    full.update(env)
    log = open(ml_root.parent / f"agent-{attempt}.err", "wb")  # noqa: SIM115 - child owns it
    return subprocess.Popen(
        [sys.executable, "-m", "finetune.backends.ec2.agent"],
        env=full,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a test can kill agent and trainer together
    )


def s3_text(prefix: str, name: str) -> str | None:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    try:
        return s3.get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return None


def s3_keys(prefix: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def status(prefix: str) -> dict:
    return json.loads(s3_text(prefix, p.STATUS) or "{}")


def wait_for(predicate, timeout: float = 60.0, every: float = 0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")


def checkpoint_seqs(keys: list[str]) -> set[int]:
    """Sequence numbers of the complete checkpoints among S3 keys or local paths."""
    return {int(k.split("ckpt-")[1][:6]) for k in keys if "ckpt-" in k and k.endswith("/COMPLETE")}
