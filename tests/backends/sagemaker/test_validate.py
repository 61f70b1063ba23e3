"""Offline request validation and the status mapping: pure functions, no AWS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from finetune.backends.sagemaker import status as st
from finetune.backends.sagemaker import validate
from finetune.backends.sagemaker.submit import next_attempt

ROLE = "arn:aws:iam::123456789012:role/finetune-sagemaker"
IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/finetune:0.1.0"


def req(**changes) -> dict:
    base = {
        "TrainingJobName": "finetune-20261122-101500-a3f9",
        "RoleArn": ROLE,
        "AlgorithmSpecification": {"TrainingImage": IMAGE},
        "ResourceConfig": {"InstanceType": "ml.p3.8xlarge"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
        "EnableManagedSpotTraining": True,
        "CheckpointConfig": {"S3Uri": "s3://b/c/"},
        "InputDataConfig": [],
        "HyperParameters": {"lr": "0.1"},
        "Environment": {},
    }
    return {**base, **changes}


def whats(problems) -> str:
    return " | ".join(p.what for p in problems)


def test_a_good_request_passes():
    assert validate.check_request(req(), "eu-west-1") == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"TrainingJobName": "x" * 64}, "is not 1-63"),
        ({"TrainingJobName": "run_1"}, "is not 1-63"),
        ({"RoleArn": "finetune-sagemaker"}, "not an IAM role ARN"),
        ({"RoleArn": None}, "no execution role"),
        (
            {"StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 60}},
            "--max-wait",
        ),
        ({"ResourceConfig": {"InstanceType": "ml.p9.8xlarge"}}, "Unknown instance type"),
        ({"AlgorithmSpecification": {"TrainingImage": "finetune:latest"}}, "not an ECR image"),
        ({"HyperParameters": {"weights": "s3://u:hunter2@host/w"}}, "password in a URL"),
        ({"Environment": {"DB_PASSWORD": "x"}}, "environment variable DB_PASSWORD"),
        ({"Environment": {"KEY": "-----BEGIN RSA PRIVATE KEY-----"}}, "a private key"),
        ({"VpcConfig": {"Subnets": ["s-1"], "SecurityGroupIds": []}}, "needs both subnets"),
    ],
)
def test_each_problem_is_found_with_a_fix(changes, expected):
    problems = validate.check_request(req(**changes), "eu-west-1")
    assert expected in whats(problems)
    assert all(p.fix for p in problems)


def test_image_region_must_match_the_job():
    assert "job runs in us-east-1" in whats(validate.check_request(req(), "us-east-1"))


def test_errors_list_every_problem():
    err = validate.PreflightError(
        validate.check_request(req(RoleArn="x", TrainingJobName="a_b"), "eu-west-1")
    )
    assert len(err.problems) == 2 and "To fix:" in str(err)


def test_budget():
    from datetime import date

    from finetune.catalog.fx import Rate
    from finetune.estimate.money import SAGEMAKER, Charge

    # 2 hosts at USD 3.60/h, 1.2 USD per EUR: 3 EUR/h each, 6 EUR for one hour of both
    charge = Charge(SAGEMAKER, "ml.p3.2xlarge", 2, 0, 3.6)
    rate = Rate(1.2, date(2025, 6, 30), "test")
    assert validate.check_budget(charge, rate, 3600, 6.0) == []
    (problem,) = validate.check_budget(charge, rate, 3600, 5.0)
    assert "EUR 6.00" in problem.what and "50 minutes" in problem.fix  # 5 / 6 of an hour


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def test_states():
    assert (
        st.state_of({"TrainingJobStatus": "InProgress", "SecondaryStatus": "Starting"})
        == "submitted"
    )
    assert (
        st.state_of({"TrainingJobStatus": "InProgress", "SecondaryStatus": "Interrupted"})
        == "running"
    )
    assert st.state_of({"TrainingJobStatus": "Stopping"}) == "stopping"
    assert st.state_of({"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"}) == "stopped"
    limit = {"TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded"}
    assert st.state_of(limit) == "interrupted"
    assert "--max-runtime" in st.reason_of({**limit, "StoppingCondition": {}}, "interrupted", "r")


def test_a_trainer_stopped_in_its_start_up_is_interrupted_and_said_so(tmp_path):
    """The failure text our entrypoint leaves for a stop before the first step (the real
    mark_stopped's): interrupted, resumable, and not said to have checkpointed."""
    from finetune.contracts.container import STARTING, mark_stopped

    reason = mark_stopped(tmp_path, "SIGTERM", STARTING)
    job = {"TrainingJobStatus": "Failed", "FailureReason": f"AlgorithmError: {reason}"}
    assert st.state_of(job) == "interrupted"
    said = st.reason_of(job, "interrupted", "r")
    assert "stopped by a signal during its start-up" in said and "after a checkpoint" not in said
    assert "finetune launch --resume r" in said


def test_interrupted_seconds_while_still_waiting():
    transitions = [
        {"Status": "Training", "StartTime": at(0)},
        {"Status": "Interrupted", "StartTime": at(100)},
        {"Status": "Starting", "StartTime": at(150)},
    ]
    assert st.interrupted_seconds(transitions, now=at(400).timestamp()) == 300
    transitions.append({"Status": "Training", "StartTime": at(500)})
    transitions.append({"Status": "Interrupted", "StartTime": at(600), "EndTime": at(610)})
    transitions.append({"Status": "Training", "StartTime": at(610)})
    assert st.interrupted_seconds(transitions) == 400 + 10


def test_next_attempt_names():
    assert next_attempt(None) == 0
    assert next_attempt("arn:aws:sagemaker:r:1:training-job/finetune-2026-a3f9") == 1
    assert next_attempt("arn:aws:sagemaker:r:1:training-job/finetune-2026-a3f9-r1") == 2
