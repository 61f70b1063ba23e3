"""What a per-run SageMaker role needs for a job in the user's VPC or with a KMS key, and only
then (runrole.policy adds these statements when --subnet/--security-group or kms_key is given).

SageMaker creates the job's network interfaces and uses the KMS key with the job's execution
role, so a per-run role without these permissions fails such a job on real AWS (moto checks no
permissions). The lists follow AWS's documentation: "Give SageMaker training jobs access to
resources in your Amazon VPC" (the nine ec2 actions below) and CreateTrainingJob's
OutputDataConfig.KmsKeyId / ResourceConfig.VolumeKmsKeyId (kms:Encrypt, Decrypt,
GenerateDataKey for the S3 output and input, kms:CreateGrant for the training volume). The
permissions boundary (infra/policies/sagemaker-run-boundary.json) allows the same actions, no wider.
"""

from __future__ import annotations

import re

from finetune.aws.session import partition_of

ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",  # authorized on the interface (ec2:Subnet, ec2:Vpc)
]
# No resource-level permissions (describe calls).
DESCRIBE_ACTIONS = [
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
]
KEY_ACTIONS = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]


def vpc_statements(subnets, groups, region: str, account: str) -> list[dict]:
    """Network interfaces in ``subnets`` with ``groups`` only; nothing without a VPC. Sharing,
    deleting and unsharing are held to interfaces in the run's own subnets (``ec2:Subnet``),
    never another workload's interface elsewhere in the account (the boundary holds them to
    the stack's subnets and VPC as well)."""
    if not subnets and not groups:
        return []

    ec2 = f"arn:{partition_of(region)}:ec2:{region}:{account}"
    interfaces = f"{ec2}:network-interface/*"
    placed = [f"{ec2}:subnet/{s}" for s in subnets] + [f"{ec2}:security-group/{g}" for g in groups]
    manage = _allow("VpcManageInterfaces", ENI_ACTIONS[1:], [interfaces])
    manage["Condition"] = {"ArnEquals": {"ec2:Subnet": [f"{ec2}:subnet/{s}" for s in subnets]}}
    return [
        _allow("VpcCreateInterfaces", ENI_ACTIONS[:1], [interfaces, *placed]),
        manage,
        _allow("VpcDescribe", DESCRIBE_ACTIONS, ["*"])
        | {"Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
    ]


def kms_statements(key: str | None, region: str, account: str) -> list[dict]:
    """Use of ``key`` (a key id, key ARN, alias name or alias ARN) through S3 and SageMaker,
    and grants on it for AWS resources (the volume); nothing without a key."""
    if not key:
        return []
    resource, condition = key_resource(key, region, account)
    use = _allow("UseJobKey", KEY_ACTIONS, [resource])
    grant = _allow("GrantJobKeyToVolume", ["kms:CreateGrant"], [resource])
    grant["Condition"] = {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    if condition:
        use["Condition"] = dict(condition)
        grant["Condition"] |= condition
    return [use, grant]


def key_resource(key: str, region: str, account: str) -> tuple[str, dict]:
    """The key ARN IAM authorizes for ``key``; an alias is matched by kms:ResourceAliases on
    any key of its account (IAM never sees the alias as the resource)."""
    m = re.fullmatch(r"arn:([a-z-]+):kms:([a-z0-9-]+):(\d{12}):(key|alias)/(.+)", key)
    if m and m[4] == "key":
        return key, {}
    if m:
        arn = f"arn:{m[1]}:kms:{m[2]}:{m[3]}:key/*"
        return arn, {"ForAnyValue:StringEquals": {"kms:ResourceAliases": f"alias/{m[5]}"}}
    base = f"arn:{partition_of(region)}:kms:{region}:{account}"
    if key.startswith("alias/"):
        return f"{base}:key/*", {"ForAnyValue:StringEquals": {"kms:ResourceAliases": key}}
    return f"{base}:key/{key}", {}


def _allow(sid: str, actions: list[str], resources: list[str]) -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": list(actions), "Resource": resources}
