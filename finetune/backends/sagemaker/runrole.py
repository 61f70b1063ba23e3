"""An execution role per SageMaker run, as the EC2 backend has an instance role per run.

One role shared by every job let any job overwrite any run's model and read, write or delete
any run's checkpoints. A run's role may only read its dataset (finetune.aws.datasetscope),
write its own jobs' output prefixes and read/write/delete its own checkpoint prefix, pull the
training image and write the training logs and metrics. It carries the stack's permissions
boundary (the caller policy allows creating it only so) and is deleted when the run ends.

FINETUNE_ROLE_ARN (or JobOptions.role_arn) still names a role of your own instead; finetune
cannot scope such a role to one run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from finetune.aws import imageref, retries
from finetune.aws.datasetscope import read_prefixes
from finetune.aws.errors import aws_errors
from finetune.aws.infra import boundary_arn
from finetune.aws.session import Aws, partition_of
from finetune.backends.sagemaker import jobaccess
from finetune.backends.sagemaker import request as rq
from finetune.backends.sagemaker.sourcedir import CODE_ROOT

ROLE_PATH = "/finetune-bounded/sagemaker/"  # finetune.aws.infra.run_role_path("sagemaker")
POLICY_NAME = "run-access"
LOGS = "log-group:/aws/sagemaker/TrainingJobs"


def role_name(run_id: str) -> str:
    return f"finetune-run-{run_id}"[:64]


def role_arn(account: str, run_id: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::{account}:role{ROLE_PATH}{role_name(run_id)}"


def trust(account: str) -> dict:
    """SageMaker of this account only (the confused-deputy guard)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": account}},
            }
        ],
    }


def policy(
    run_id: str,
    bucket: str,
    reads: list[str],
    image: str,
    region: str,
    account: str,
    network: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
    kms_key: str | None = None,
):
    """The run's permissions: ``reads`` are key prefixes of the dataset (and --read-prefix);
    ``network`` (subnets, security groups) and ``kms_key`` add what a job in a VPC or an
    encrypted job needs, only when given (finetune.backends.sagemaker.jobaccess)."""
    partition = partition_of(region)
    obj = f"arn:{partition}:s3:::{bucket}/"
    job = rq.job_name(run_id)  # resumed jobs are JOB-r1, JOB-r2, ...
    checkpoints = f"{rq.CHECKPOINT_ROOT}{run_id}/"
    statements = [
        _allow("ListOwnPrefixes", ["s3:ListBucket"], [f"arn:{partition}:s3:::{bucket}"])
        | {"Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in (*reads, checkpoints)]}}},
        _allow("ReadDataset", ["s3:GetObject"], [f"{obj}{p}*" for p in reads]),
        # the torch engine's source directory (sourcedir.py), which AWS's PyTorch image runs
        _allow("ReadOwnCode", ["s3:GetObject"], [f"{obj}{CODE_ROOT}{run_id}/*"]),
        _allow(
            "WriteOwnOutput",
            ["s3:PutObject"],
            [f"{obj}{rq.OUTPUT_ROOT}{job}/*", f"{obj}{rq.OUTPUT_ROOT}{job}-r*"],
        ),
        _allow(
            "SyncOwnCheckpoints",
            ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
            [f"{obj}{checkpoints}*"],
        ),
        _allow("EcrToken", ["ecr:GetAuthorizationToken"], ["*"]),
        *_log_statements(f"arn:{partition}:logs:{region}:{account}:{LOGS}", job),
    ]
    repo = _repository_arn(image)
    if repo:
        pull = [
            "ecr:BatchCheckLayerAvailability",
            "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer",
        ]
        statements.append(_allow("PullImage", pull, [repo]))
    statements += jobaccess.vpc_statements(*network, region, account)
    statements += jobaccess.kms_statements(kms_key, region, account)
    return {"Version": "2012-10-17", "Statement": statements}


def _log_statements(logs: str, job: str) -> list[dict]:
    """The training log group, the run's own jobs' streams in it (SageMaker names them
    JOB/algo-N-EPOCH; resumes are JOB-rN) and SageMaker's training metrics namespace. Streams
    of other jobs stay out of reach: finetune reads epoch metrics from log lines."""
    own = [f"{logs}:log-stream:{job}/*", f"{logs}:log-stream:{job}-r*/*"]
    return [
        _allow("LogGroup", ["logs:CreateLogGroup", "logs:DescribeLogStreams"], [logs]),
        _allow("WriteOwnLogStreams", ["logs:CreateLogStream", "logs:PutLogEvents"], own),
        _allow("PutTrainingMetrics", ["cloudwatch:PutMetricData"], ["*"])
        | {"Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}},
    ]


def _allow(sid: str, actions: list[str], resources: list[str]) -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}


def _repository_arn(image: str) -> str | None:
    """The ARN of the ECR repository ``image`` is pulled from (None: no ECR image). SageMaker
    takes an image only with a tag or digest (preflight refuses one without)."""
    ref = imageref.parse(image)
    return ref.repository_arn if ref else None


def ensure(iam, run_id: str, account: str, doc: dict, boundary: str) -> None:
    """Create the run's role (idempotent: a resumed run finds it) and set its policy."""
    tags = [{"Key": "project", "Value": "finetune"}, {"Key": "finetune:run-id", "Value": run_id}]
    try:
        retries.call(
            iam.create_role,
            RoleName=role_name(run_id),
            Path=ROLE_PATH,
            AssumeRolePolicyDocument=json.dumps(trust(account)),
            PermissionsBoundary=boundary,
            Description=f"finetune run {run_id}: its own S3 prefixes only (SageMaker)",
            Tags=tags,
        )
    except Exception as exc:
        if retries.error_code(exc) != "EntityAlreadyExists":
            raise
    retries.call(
        iam.put_role_policy,
        RoleName=role_name(run_id),
        PolicyName=POLICY_NAME,
        PolicyDocument=json.dumps(doc),
    )


def delete(iam, run_id: str) -> None:
    """Remove the run's role once its job ended; what is already gone is fine."""
    steps: tuple[tuple[Any, dict[str, Any]], ...] = (
        (iam.delete_role_policy, {"PolicyName": POLICY_NAME}),
        (iam.delete_role, {}),
    )
    for call, kwargs in steps:
        try:
            retries.call(call, RoleName=role_name(run_id), **kwargs)
        except Exception as exc:
            if retries.error_code(exc) != "NoSuchEntity":
                raise


def with_run_role(opts, aws: Aws, run_id: str):
    """Without a role of the user's own: this run's role (created by ``ensure_run_role``)."""
    if opts.role_arn and not opts.run_role:
        return opts
    arn = role_arn(aws.account_id, run_id, partition_of(aws.region))
    return replace(opts, role_arn=arn, run_role=True)


def ensure_run_role(aws: Aws, opts, run_id: str, dataset_root: str) -> None:
    """Create (or refresh) the run's role: its reads, its outputs, its checkpoints."""
    reads = read_prefixes(dataset_root, opts.bucket, opts.read_prefix)
    network = (tuple(opts.subnet), tuple(opts.security_group))
    doc = policy(
        run_id,
        opts.bucket,
        reads,
        opts.image,
        aws.region,
        aws.account_id,
        network=network,
        kms_key=opts.kms_key,
    )
    boundary = boundary_arn(aws.account_id, aws.region, "sagemaker")
    with aws_errors("CreateRole", resource=role_name(run_id), region=aws.region):
        ensure(aws.client("iam"), run_id, aws.account_id, doc, boundary)


def forget_run_role(aws: Aws, run_id: str) -> None:
    """Delete the run's own role once its job has ended."""
    with aws_errors("DeleteRole", resource=role_name(run_id), region=aws.region):
        delete(aws.client("iam"), run_id)
