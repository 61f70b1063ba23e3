"""The agent's entry: configuration, preparation of the /opt/ml tree, supervision, shutdown."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

from finetune.backends.ec2.agent import hosts
from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.agent.environment import AgentConfig
from finetune.backends.ec2.agent.imds import Imds, ImdsUnavailable
from finetune.backends.ec2.agent.s3sync import RunStore
from finetune.backends.ec2.agent.supervisor import AgentError, Attempt, StopSignal, supervise


def main(env=None, s3=None) -> int:
    """Run one attempt; returns 0 (completed), 1 (failed) or 75 (interrupted, resumable)."""
    cfg = AgentConfig.from_env(env)
    stop = StopSignal()
    stop.install()  # from the start: a notice during the dataset download counts too
    store = RunStore(s3 or _s3_client(), cfg.bucket, cfg.prefix)
    run = Attempt(cfg, store, Imds(cfg.imds_url), started_at=time.time())
    try:
        run.instance_id = run.imds.instance_id()
    except ImdsUnavailable:
        run.instance_id = None
    if cfg.hosts > 1:
        run.host = "pending"  # named once hosts.json lists this instance
    try:
        prepare(run)
        code = supervise(run, stop)
    except Exception as exc:  # whatever broke, record it in S3 and still shut down
        code = _failed_before_training(run, exc)
    shutdown(cfg)
    return code


def prepare(run: Attempt) -> None:
    """plan.json, dataset and checkpoints from S3 into an mltree layout; the log so far.
    Every host restores the checkpoints (all must resume from the same epoch)."""
    # deferred: a failure to import the plan's stack is caught by main (recorded, shut down)
    from finetune.contracts import mltree
    from finetune.plan import Plan

    cfg, store = run.cfg, run.store
    run.status(p.STARTING)
    previous_log = store.read_text(p.LOG)
    if previous_log:
        cfg.log_file.parent.mkdir(parents=True, exist_ok=True)
        cfg.log_file.write_text(previous_log, encoding="utf-8")
    run.say(f"starting on {run.instance_id or 'this machine'}")
    text = store.read_text(p.PLAN)
    if text is None:
        raise AgentError(f"no {p.PLAN} under s3://{cfg.bucket}/{cfg.prefix}")
    _check_digest(cfg, text)
    plan = Plan.from_json(text)
    files = _download_dataset(run, plan, cfg.ml_root / "input" / "files")
    dataset = plan.dataset.model_copy(update={"path": str(files)})
    mltree.layout(cfg.ml_root, plan.model_copy(update={"dataset": dataset}))
    if cfg.hosts > 1:
        hosts.join(run, hosts.wait_for_hosts(run))
    count = store.download_tree(p.CHECKPOINTS, cfg.ml_root / "checkpoints")
    run.prior_metrics = store.read_text(p.METRICS) or ""
    run.say(f"dataset ready; {count} checkpoint file(s) restored from S3")


def _check_digest(cfg: AgentConfig, text: str) -> None:
    """plan.json as the launch wrote it, or nothing runs (its prefix is writable by runs)."""
    found = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if cfg.plan_sha256 and found != cfg.plan_sha256:
        raise AgentError(
            f"refusing s3://{cfg.bucket}/{cfg.prefix}{p.PLAN}: its sha256 {found} is not the "
            f"{cfg.plan_sha256} the launch recorded (it was changed after the launch)"
        )


def _download_dataset(run: Attempt, plan, dest: Path) -> Path:
    """The channel files the plan names, from PREFIX/CHANNEL/NAME in S3, into one folder."""
    from finetune.contracts import mltree  # deferred: as in prepare

    bucket, prefix = p.split_s3_uri(run.cfg.dataset_uri)
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    dest.mkdir(parents=True, exist_ok=True)
    s3 = run.store.s3
    for channel, split in mltree.CHANNELS.items():  # finetune.aws.s3upload's layout
        for name in mltree.channel_files(plan.dataset.name, split, plan.dataset.test_count > 0):
            if (dest / name).is_file():
                continue
            key = f"{prefix}{channel}/{name}"
            try:
                s3.download_file(bucket, key, str(dest / name))
            except Exception as exc:  # botocore's ClientError: a missing file is fatal here
                raise AgentError(f"cannot download s3://{bucket}/{key}: {exc}") from None
    return dest


def _failed_before_training(run: Attempt, exc: Exception) -> int:
    why = f"the agent could not start the training: {exc}"
    try:
        run.say(why)
        run.store.upload_file(run.cfg.log_file, p.LOG)
        # the run's own status.json: one host that cannot start fails the whole attempt
        run.status(p.FAILED, key=p.STATUS, reason=why, ended_at=time.time())
    except Exception as again:  # S3 itself may be the problem: still shut down
        sys.stderr.write(f"[finetune-agent] cannot record the failure: {again}\n")
    return p.EXIT_FAILED


def shutdown(cfg: AgentConfig) -> None:
    """Run the configured shutdown command (none by default: the user data powers off)."""
    if not cfg.shutdown:
        return
    try:
        subprocess.run(list(cfg.shutdown), check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"[finetune-agent] shutdown command failed: {exc}\n")


def _s3_client():
    import boto3

    return boto3.client("s3")
