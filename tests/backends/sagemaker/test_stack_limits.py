"""Issue 23, finding 12 for SageMaker: a job the stack's parameters would deny (the caller
policy's sagemaker:InstanceTypes and sagemaker:MaxRuntimeInSeconds conditions) is refused
before anything is uploaded or created, naming the parameter. The stack is the real
template deployed into moto."""

from __future__ import annotations

import pytest

from finetune.aws import infra
from finetune.aws.session import connect
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.sagemaker.request import JobOptions
from finetune.errors import UsageError
from tests.aws import helpers as h
from tests.aws.conftest import REGION


@pytest.mark.filterwarnings("ignore:Tried to parse")  # moto's CFN: no AWS::S3::BucketPolicy
def test_a_job_outside_the_stacks_limits_is_refused_first(cloud, tiny_dataset, tmp_path):
    aws = connect(REGION)
    params = {"SageMakerInstanceTypes": "ml.g6.*", "MaxRuntimeSeconds": "7200"}
    infra.deploy(aws, "finetune", "finetune-stack", 0, vpc="vpc-0a1b2c3d", parameters=params)
    plan = h.sm_plan(tiny_dataset)  # ml.p3.8xlarge
    with pytest.raises(UsageError, match="SageMakerInstanceTypes") as err:
        SageMakerBackend().submit(plan, h.new_run(tmp_path, plan))
    assert "ml.p3.8xlarge" in str(err.value) and "To fix:" in str(err.value)
    assert cloud.requests("CreateTrainingJob") == [] and cloud.requests("PutObject") == []
    params["SageMakerInstanceTypes"] = "ml.p3.*"
    infra.deploy(aws, "finetune", "finetune-stack", 0, vpc="vpc-0a1b2c3d", parameters=params)
    long = SageMakerBackend(JobOptions(max_runtime=3 * 3600))
    with pytest.raises(UsageError, match="MaxRuntimeSeconds"):
        long.submit(plan, h.new_run(tmp_path, plan))
    assert cloud.requests("CreateTrainingJob") == []
    SageMakerBackend(JobOptions(max_runtime=3600)).submit(plan, h.new_run(tmp_path, plan))
    (job,) = cloud.requests("CreateTrainingJob")
    assert job.json["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600


@pytest.mark.filterwarnings("ignore:Tried to parse")  # moto's CFN: no AWS::S3::BucketPolicy
def test_a_job_into_a_subnet_or_group_the_stack_does_not_list_is_refused_first(
    cloud, tiny_dataset, tmp_path
):
    aws = connect(REGION)
    params = {"SageMakerSubnets": "subnet-0a1b", "SageMakerSecurityGroups": "sg-0c2d"}
    infra.deploy(aws, "finetune", "finetune-stack", 0, vpc="vpc-0a1b2c3d", parameters=params)
    plan = h.sm_plan(tiny_dataset)
    for subnet, group, named in (
        ("subnet-0f0re1gn", "sg-0c2d", "SageMakerSubnets"),
        ("subnet-0a1b", "sg-0db0trusted", "SageMakerSecurityGroups"),
    ):
        be = SageMakerBackend(JobOptions(subnet=(subnet,), security_group=(group,)))
        with pytest.raises(UsageError, match=named) as err:
            be.submit(plan, h.new_run(tmp_path, plan))
        assert "To fix:" in str(err.value)
    assert cloud.requests("CreateTrainingJob") == [] and cloud.requests("PutObject") == []
    ok = SageMakerBackend(JobOptions(subnet=("subnet-0a1b",), security_group=("sg-0c2d",)))
    ok.submit(plan, h.new_run(tmp_path, plan))
    (job,) = cloud.requests("CreateTrainingJob")
    assert job.json["VpcConfig"]["Subnets"] == ["subnet-0a1b"]
