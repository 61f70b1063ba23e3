"""A run's own IAM role and instance profile on EC2: created with the run's S3 policy inline
and the permissions boundary, with AWS's Session Manager policy in the region's partition, and
deleted with the run (what is already gone is fine)."""

from __future__ import annotations

import json

from finetune.backends.ec2.request import OWNER_TAG, PROJECT_TAG, RUN_TAG
from finetune.backends.ec2.setup.infra import call, cloud_error, error_code
from finetune.errors import CloudError

ROLE_PATH = "/finetune-bounded/ec2/"  # finetune.aws.infra.run_role_path("ec2")
SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"  # in partition aws
# who launched, and the caller's aws:userid (the key instances/hosts.py OWNER_ID_TAG names)
OWNER_KEYS = (OWNER_TAG, "finetune:owner-id")


def ssm_core_policy(iam) -> str:
    """AWS's managed Session Manager policy in the partition of ``iam``'s region (China and
    GovCloud have their own ARNs: arn:aws-cn:..., arn:aws-us-gov:...). botocore resolves the
    partition from the client's region (an IAM client's region_name becomes 'aws-cn-global')."""
    partition = getattr(iam.meta, "partition", None) or "aws"
    return SSM_CORE_POLICY.replace("arn:aws:", f"arn:{partition}:", 1)


_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def profile_name(run_id: str) -> str:
    return f"finetune-run-{run_id}"[:64]


def ensure_instance_profile(
    iam, run_id: str, policy: dict, boundary: str, owner: tuple[str, str] = ("", "")
) -> str:
    """A role + instance profile for this run only, with ``policy`` inline (idempotent). The
    role carries the permissions ``boundary`` (finetune.aws.infra.boundary_arn): the caller
    policy allows creating and widening run roles only with it. Both are tagged with the
    run and ``owner`` (who launched, the caller's aws:userid), as its instances are, so
    `finetune cleanup` can tell whose they are."""
    name = profile_name(run_id)
    tags = [{"Key": PROJECT_TAG[0], "Value": PROJECT_TAG[1]}, {"Key": RUN_TAG, "Value": run_id}]
    tags += [{"Key": k, "Value": v} for k, v in zip(OWNER_KEYS, owner, strict=True) if v]
    try:  # each call with our retries (IAM throttles); a retried create finds it made
        _ignore_exists(
            lambda: call(
                iam.create_role,
                RoleName=name,
                Path=ROLE_PATH,
                AssumeRolePolicyDocument=json.dumps(_TRUST),
                Tags=tags,
                Description=f"finetune run {run_id}: its own S3 prefixes only",
                PermissionsBoundary=boundary,
            )
        )
        call(
            iam.put_role_policy,
            RoleName=name,
            PolicyName="run-access",
            PolicyDocument=json.dumps(policy),
        )
        call(iam.attach_role_policy, RoleName=name, PolicyArn=ssm_core_policy(iam))
        _ignore_exists(
            lambda: call(
                iam.create_instance_profile, InstanceProfileName=name, Path=ROLE_PATH, Tags=tags
            )
        )
        profile = call(iam.get_instance_profile, InstanceProfileName=name)["InstanceProfile"]
        if not profile["Roles"]:
            call(iam.add_role_to_instance_profile, InstanceProfileName=name, RoleName=name)
    except CloudError:
        raise
    except Exception as exc:
        raise cloud_error(exc, f"creating the instance role {name}") from None
    return name


def delete_instance_profile(iam, name: str) -> None:
    """Remove a run's profile and role; what is already gone is fine."""
    steps = [
        lambda: iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=name),
        lambda: iam.delete_instance_profile(InstanceProfileName=name),
        lambda: iam.delete_role_policy(RoleName=name, PolicyName="run-access"),
        lambda: iam.detach_role_policy(RoleName=name, PolicyArn=ssm_core_policy(iam)),
        lambda: iam.delete_role(RoleName=name),
    ]
    for step in steps:
        try:
            call(step)
        except Exception as exc:
            if error_code(exc) != "NoSuchEntity":
                raise cloud_error(exc, f"deleting the instance role {name}") from None


def _ignore_exists(fn) -> None:
    try:
        fn()
    except Exception as exc:
        if error_code(exc) != "EntityAlreadyExists":
            raise
