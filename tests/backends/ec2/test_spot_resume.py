"""End to end on one machine: the control side launches into moto, the agent runs here
against moto S3 and the fake IMDS, a spot notice interrupts it, the control side relaunches,
and the second attempt resumes from the checkpoint in S3 and completes."""

from __future__ import annotations

import importlib.util
import re

import pytest

from finetune.backends.ec2.agent import protocol as p
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.state import Ec2State

from .agent_env import checkpoint_seqs, s3_keys, start_agent, wait_for
from .control import instances_of, launch, sync, terminate

LIVE = ["pending", "running", "stopping", "stopped"]


def _agent_env(run) -> dict:
    state = Ec2State.load(run.run_dir)
    return {
        p.ENV_BUCKET: state.bucket,
        p.ENV_PREFIX: state.prefix,
        p.ENV_DATASET: state.dataset_uri,
    }


def _interrupt_then_resume(run, backend, ledger, fake_imds, tmp_path, first_ready, **env):
    """Attempt 1 until ``first_ready``, a spot notice, relaunch, attempt 2 to the end."""
    base = _agent_env(run)
    first = start_agent(base, tmp_path / "ml1", fake_imds.url, attempt=1, **env.get("one", {}))

    def ready():
        if first.poll() is not None:
            log = (tmp_path / "agent-1.err").read_text()
            raise AssertionError(f"attempt 1 ended early ({first.returncode}):\n{log}")
        return first_ready(base[p.ENV_PREFIX])

    wait_for(ready, timeout=120, every=0.2)
    fake_imds.schedule_notice()
    assert first.wait(120) == p.EXIT_INTERRUPTED
    first_instance = run.backend_ref
    terminate(first_instance)  # two minutes later, EC2 takes the instance back
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "submitted", status
    [second_instance] = instances_of(run.id, LIVE)
    assert second_instance["InstanceId"] == run.backend_ref != first_instance  # ledger follows
    fake_imds.notice = None
    second = start_agent(base, tmp_path / "ml2", fake_imds.url, attempt=2, **env.get("two", {}))
    assert second.wait(300) == p.EXIT_COMPLETED
    run, status, epochs = sync(run, backend, ledger)
    assert status.state == "completed" and run.status == "completed"
    assert instances_of(run.id, LIVE) == []
    return run, epochs


def test_spot_notice_relaunch_resume_with_standin(ec2_aws, fake_imds, tiny_dataset, tmp_path):
    opts = Ec2Options(max_restarts=2)
    run, backend, ledger = launch(tmp_path, tiny_dataset, opts, overrides=["schedule.epochs=3"])
    run, epochs = _interrupt_then_resume(
        run,
        backend,
        ledger,
        fake_imds,
        tmp_path,
        lambda prefix: checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS)),
        one={"STANDIN_EPOCH_SECONDS": "0.05", "STANDIN_HOLD_AT_EPOCH": "1"},
        two={"STANDIN_EPOCH_SECONDS": "0.05"},
    )
    assert [e.epoch for e in epochs] == [0, 1, 2]
    first, second = run.charges  # the spot notice came from EC2 (IMDS): attempt 1 is EC2's
    assert first["interrupted_by_ec2"] and first["label"].endswith("interrupted)")
    assert not second["interrupted_by_ec2"] and second["label"].endswith("completed)")
    assert run.interrupted_seconds > 0
    assert all(r["token"] for r in fake_imds.requests if r["method"] == "GET")


@pytest.mark.slow
@pytest.mark.mxnet
def test_spot_notice_relaunch_resume_with_the_real_trainer(
    ec2_aws, fake_imds, tiny_dataset, tmp_path
):
    """`python -m finetune.train` (ResNet-18 v1, 32 px, batch 8) is interrupted after its
    first epoch, checkpoints on SIGTERM, and the relaunched attempt resumes mid-epoch and
    finishes."""
    if importlib.util.find_spec("mxnet") is None:
        pytest.skip("the MXNet engine is not installed")
    # three epochs: the notice comes after the first, and the agent acts on it within its
    # 0.1 s IMDS poll (start_agent), so two epochs to go are margin enough on a loaded machine.
    # Five of the ten batches per epoch: the count is not the point (1.3-3.7 s an epoch on a
    # loaded machine). Until 2026-11-27 the wait below took the empty metrics file the trainer
    # writes at its start for the first epoch's line, so the notice came at epoch 0's first
    # batch and the resume never had a finished epoch to keep.
    overrides = ["schedule.epochs=3", "data.image_size=32", "train.max_batches_per_epoch=5"]
    run, backend, ledger = launch(
        tmp_path, tiny_dataset, Ec2Options(), device="cpu", overrides=overrides
    )
    no_standin = {p.ENV_TRAINER: "", p.ENV_INTERVAL: "0.5"}

    def first_epoch_done(prefix: str) -> bool:  # watched locally: the notice comes early
        # a line, not the file: the trainer writes the (empty) file when it starts
        metrics = tmp_path / "ml1" / "output" / "data" / "metrics.jsonl"
        return metrics.is_file() and metrics.read_text().strip() != ""

    run, epochs = _interrupt_then_resume(
        run, backend, ledger, fake_imds, tmp_path, first_epoch_done, one=no_standin, two=no_standin
    )
    assert [e.epoch for e in epochs] == list(range(3))
    log = backend.logs(ledger.get(run.id))[0]
    assert "attempt 2]" in log and "finetune-resume checkpoint=" in log
    resumed_at = re.search(r"finetune-resume checkpoint=\S+ epoch=(\d+)", log)
    assert resumed_at and int(resumed_at[1]) >= 1, log[-3000:]  # the first epoch was kept
    assert any("/model/" in k for k in s3_keys(p.run_prefix(run.id)))
