"""The on-instance agent, run as a subprocess against moto S3 and the fake IMDS.

The stand-in trainer (standin_trainer.py) keeps these fast; test_agent_real_trainer.py runs
the same paths with `python -m finetune.train`.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from finetune.backends.ec2.agent import protocol as p

from ..agent_env import (
    checkpoint_seqs,
    fill_prefix,
    make_plan,
    s3_keys,
    s3_text,
    start_agent,
    status,
    wait_for,
)

RUN = "ft-20261122-101500-ag01"


@pytest.fixture
def agent_env(ec2_aws, tiny_dataset):
    return fill_prefix(make_plan(tiny_dataset, "schedule.epochs=3"), RUN)


def _all_gets_had_tokens(imds) -> None:
    gets = [r for r in imds.requests if r["method"] == "GET"]
    assert gets, "the agent never asked IMDS"
    assert all(r["token"] for r in gets), "an IMDS request went out without a token"


def test_completed_run_uploads_model_and_final_status(agent_env, fake_imds, tmp_path):
    prefix = agent_env[p.ENV_PREFIX]
    proc = start_agent(agent_env, tmp_path / "ml", fake_imds.url, STANDIN_EPOCH_SECONDS="0.05")
    assert proc.wait(60) == p.EXIT_COMPLETED
    doc = status(prefix)
    assert doc["state"] == "completed" and doc["attempt"] == 1
    assert doc["instance_id"] == fake_imds.instance_id and doc["epochs_done"] == 3
    keys = s3_keys(prefix)
    assert prefix + "model/model.params" in keys
    assert checkpoint_seqs(keys) == {2, 3}  # pruned locally -> deleted in S3 (keep two)
    epochs = [json.loads(line)["epoch"] for line in s3_text(prefix, p.METRICS).splitlines()]
    assert epochs == [0, 1, 2]
    log = s3_text(prefix, p.LOG)
    assert "standin: epoch 3 done" in log and "training completed" in log
    assert (tmp_path / "shutdown-1").exists(), "the shutdown command did not run"
    _all_gets_had_tokens(fake_imds)


def test_spot_notice_checkpoints_and_a_new_attempt_resumes(
    ec2_aws, tiny_dataset, fake_imds, tmp_path
):
    # The first attempt is held after its first epoch until the notice's SIGTERM reaches it
    # (STANDIN_HOLD_AT_EPOCH), so the notice always lands mid-run, however loaded the machine;
    # the second attempt runs the rest. With the tensorboard logger, each attempt's event file
    # ends up under the run's prefix.
    plan = make_plan(tiny_dataset, "schedule.epochs=3", "metric_logging.loggers=[tensorboard]")
    agent_env = fill_prefix(plan, RUN)
    prefix = agent_env[p.ENV_PREFIX]
    first = start_agent(
        agent_env, tmp_path / "ml1", fake_imds.url, STANDIN_EPOCH_SECONDS="0.05",
        STANDIN_HOLD_AT_EPOCH="1",
    )  # fmt: skip
    wait_for(lambda: checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS)), timeout=30)
    fake_imds.schedule_notice()
    assert first.wait(60) == p.EXIT_INTERRUPTED
    doc = status(prefix)
    assert doc["state"] == "interrupted" and doc["interruption"] == "spot"
    assert "spot interruption notice" in doc["reason"]
    assert (tmp_path / "shutdown-1").exists()
    saved = max(checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS)))
    local = max(checkpoint_seqs([str(x) for x in (tmp_path / "ml1").rglob("COMPLETE")]))
    assert saved == local, "the checkpoint written on the notice was not uploaded"

    fake_imds.notice = None  # the new instance gets no notice
    second = start_agent(
        agent_env, tmp_path / "ml2", fake_imds.url, attempt=2, STANDIN_EPOCH_SECONDS="0.05"
    )
    assert second.wait(60) == p.EXIT_COMPLETED
    log = s3_text(prefix, p.LOG)
    assert "standin: resuming at epoch" in log and "attempt 1]" in log and "attempt 2]" in log
    epochs = [json.loads(line)["epoch"] for line in s3_text(prefix, p.METRICS).splitlines()]
    assert epochs == list(range(3))  # each epoch once, across both attempts
    assert status(prefix)["state"] == "completed"
    _all_gets_had_tokens(fake_imds)
    # /opt/ml/output/tensorboard of both instances, byte for byte: the second attempt's
    # upload added its file and left the first attempt's in place
    written = {
        f.name: f.read_text()
        for ml in ("ml1", "ml2")
        for f in (tmp_path / ml / "output" / "tensorboard").iterdir()
    }
    assert len(written) == 2 and all(text.startswith("epoch ") for text in written.values())
    tb = prefix + p.TENSORBOARD
    assert {k.removeprefix(tb): s3_text(tb, k.removeprefix(tb)) for k in s3_keys(tb)} == written


def test_sigterm_is_handled_like_a_notice(agent_env, fake_imds, tmp_path):
    prefix = agent_env[p.ENV_PREFIX]
    proc = start_agent(
        agent_env, tmp_path / "ml", fake_imds.url, STANDIN_EPOCH_SECONDS="0.05",
        STANDIN_HOLD_AT_EPOCH="1",
    )  # fmt: skip
    first = wait_for(lambda: checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS)), timeout=30)
    proc.send_signal(signal.SIGTERM)  # what `docker stop` does at instance shutdown
    assert proc.wait(60) == p.EXIT_INTERRUPTED
    doc = status(prefix)
    assert doc["state"] == "interrupted" and doc["interruption"] == "signal"
    assert max(checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS))) > max(first)


def test_a_trainer_stopped_by_a_signal_of_its_own_is_interrupted_not_completed(
    agent_env, fake_imds, tmp_path
):
    """A signal that reaches the trainer alone (not the agent): it checkpoints and exits with
    EXIT_STOPPED (75) and its marker. The attempt is interrupted (resumable), no model is
    uploaded, and the next attempt finishes the run with every epoch once."""
    prefix = agent_env[p.ENV_PREFIX]
    first = start_agent(
        agent_env, tmp_path / "ml1", fake_imds.url, STANDIN_EPOCH_SECONDS="0.05",
        STANDIN_STOP_AT_EPOCH="1",
    )  # fmt: skip
    assert first.wait(60) == p.EXIT_INTERRUPTED
    doc = status(prefix)
    assert doc["state"] == "interrupted" and doc["interruption"] == "signal"
    assert doc["reason"].startswith("finetune-stopped: stopped by SIGTERM after a checkpoint")
    assert doc["epochs_done"] == 1
    assert not any("/model/" in k for k in s3_keys(prefix))
    assert "training completed" not in s3_text(prefix, p.LOG)

    second = start_agent(
        agent_env, tmp_path / "ml2", fake_imds.url, attempt=2, STANDIN_EPOCH_SECONDS="0.05"
    )
    assert second.wait(60) == p.EXIT_COMPLETED
    assert status(prefix)["state"] == "completed"
    epochs = [json.loads(line)["epoch"] for line in s3_text(prefix, p.METRICS).splitlines()]
    assert epochs == [0, 1, 2]
    assert prefix + "model/model.params" in s3_keys(prefix)


def test_sigkill_loses_at_most_one_checkpoint_interval(agent_env, fake_imds, tmp_path):
    """Killed without warning (agent and trainer together), S3 still holds the newest
    checkpoint or the one before it: the upload interval (0.3 s) is shorter than the
    checkpoint interval (one epoch, 0.4 s)."""
    prefix = agent_env[p.ENV_PREFIX]
    root = tmp_path / "ml"
    proc = start_agent(
        agent_env, root, fake_imds.url, STANDIN_EPOCH_SECONDS="0.4", STANDIN_HOLD_AT_EPOCH="2"
    )  # held after its second checkpoint: killed while it runs, however loaded the machine
    wait_for(lambda: len(checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS))) >= 1, timeout=30)
    wait_for(lambda: max(checkpoint_seqs([str(x) for x in root.rglob("COMPLETE")]), default=0) >= 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    local = max(checkpoint_seqs([str(x) for x in root.rglob("COMPLETE")]))
    saved = max(checkpoint_seqs(s3_keys(prefix + p.CHECKPOINTS)))
    assert saved >= local - 1


def test_trainer_failure_is_reported_with_its_reason(agent_env, fake_imds, tmp_path):
    prefix = agent_env[p.ENV_PREFIX]
    proc = start_agent(agent_env, tmp_path / "ml", fake_imds.url, STANDIN_FAIL="1")
    assert proc.wait(60) == p.EXIT_FAILED
    doc = status(prefix)
    assert doc["state"] == "failed" and doc["reason"] == "standin: asked to fail"
    assert s3_text(prefix, p.FAILURE) == "standin: asked to fail"
    assert (tmp_path / "shutdown-1").exists()


def test_missing_plan_fails_cleanly_and_still_shuts_down(agent_env, fake_imds, tmp_path):
    env = dict(agent_env, **{p.ENV_PREFIX: "finetune/runs/nothing-here/"})
    proc = start_agent(env, tmp_path / "ml", fake_imds.url)
    assert proc.wait(60) == p.EXIT_FAILED
    doc = status("finetune/runs/nothing-here/")
    assert doc["state"] == "failed" and "no plan.json" in doc["reason"]
    assert (tmp_path / "shutdown-1").exists()


def test_expired_token_is_renewed(agent_env, fake_imds, tmp_path):
    prefix = agent_env[p.ENV_PREFIX]
    proc = start_agent(
        agent_env, tmp_path / "ml", fake_imds.url, STANDIN_EPOCH_SECONDS="0.05",
        STANDIN_HOLD_AT_EPOCH="1",
    )  # fmt: skip
    wait_for(lambda: status(prefix).get("state") == "running", timeout=30)
    fake_imds.revoke_tokens()
    wait_for(lambda: sum(r["method"] == "PUT" for r in fake_imds.requests) >= 2, timeout=10)
    fake_imds.schedule_notice()
    assert proc.wait(60) == p.EXIT_INTERRUPTED
    assert any(r["status"] == 401 for r in fake_imds.requests)
    _all_gets_had_tokens(fake_imds)
