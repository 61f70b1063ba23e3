"""What passed under moto (which checks no permissions) and broke on real AWS (issue 22, 5):
concrete requests replayed through the GENERATED per-run policies AND the rendered boundary.

- a dataset under shared/ (the prefix datasetscope's own hint names) is readable by the run;
- a SageMaker job in a VPC or with a KMS key gets exactly the network-interface and key
  permissions it needs, only when asked, and the boundary allows them no wider;
- every ARN is in the region's partition (aws-cn, aws-us-gov).
"""

from __future__ import annotations

import json

import pytest

from finetune.aws import infra
from finetune.aws.datasetscope import read_prefixes
from finetune.backends.ec2.request import instance_policy
from finetune.backends.sagemaker import runrole
from finetune.backends.sagemaker.request import job_name
from finetune.errors import UsageError

from .iam_eval import AS_SAGEMAKER, Request, allowed

ACCOUNT, BUCKET = "123456789012", "finetune-test-bucket"
RUN, OTHER = "ft-20261124-101500-a3f9", "ft-20261124-101501-b4e0"
SUBNET, GROUP = "subnet-0a1b2c3d", "sg-0f1e2d3c"
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
PARTITIONS = {"eu-west-1": "aws", "cn-north-1": "aws-cn", "us-gov-west-1": "aws-us-gov"}


VPC_ID = "vpc-0a1b2c3d"
INSTANCE = {
    "ec2:SourceInstanceARN": "arn:aws:ec2:eu-west-1:123456789012:instance/i-0abc"
}  # instance-profile credentials carry both


def _boundary(region: str, kind: str = "sagemaker") -> dict:
    """The boundary of a stack whose SageMaker fence lists the VPC job's subnet and group."""
    fence = {"SageMakerSubnets": [SUBNET], "SageMakerSecurityGroups": [GROUP]}
    names = infra.Names(ACCOUNT, region, BUCKET, extra={"VpcId": VPC_ID, **fence})
    return infra.render(infra.policy_document(f"{kind}-boundary"), names)


def _kind(role: dict) -> str:
    """Which backend's run role ``role`` is (the EC2 instance role has the run prefix)."""
    return "ec2" if any(s.get("Sid") == "RunPrefix" for s in role["Statement"]) else "sagemaker"


def _image(region: str) -> str:
    suffix = ".cn" if region.startswith("cn-") else ""
    return f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com{suffix}/finetune@sha256:" + "a" * 64


def _sagemaker_role(region: str, reads, **kw) -> dict:
    return runrole.policy(RUN, BUCKET, reads, _image(region), region, ACCOUNT, **kw)


def _ec2_role(region: str, reads) -> dict:
    from finetune.aws.session import partition_of

    return instance_policy(
        BUCKET, f"finetune/runs/{RUN}/", reads, _image(region), partition_of(region)
    )


def _can(role: dict, region: str, action: str, resource: str, **ctx) -> bool:
    kind = _kind(role)
    if kind == "ec2":  # requests signed with EC2 role credentials (on the instance)
        ctx = {"aws:EC2InstanceSourceVPC": "vpc-0a1b2c3d", **INSTANCE, **ctx}
    else:  # requests signed with the credentials SageMaker obtained for the job
        ctx = {**AS_SAGEMAKER, **ctx}
    return allowed(role, Request(action, resource, ctx), _boundary(region, kind))


@pytest.mark.parametrize("region", list(PARTITIONS))
@pytest.mark.parametrize("kind", ["sagemaker", "ec2"])
def test_a_dataset_under_shared_is_readable_by_the_run(region, kind):
    p = PARTITIONS[region]
    reads = read_prefixes(
        f"s3://{BUCKET}/shared/shapes/", BUCKET, (f"s3://{BUCKET}/shared/shapes/",)
    )
    role = _sagemaker_role(region, reads) if kind == "sagemaker" else _ec2_role(region, reads)
    obj = f"arn:{p}:s3:::{BUCKET}"
    assert _can(role, region, "s3:GetObject", f"{obj}/shared/shapes/train/shapes_train.rec")
    assert _can(role, region, "s3:ListBucket", obj, **{"s3:prefix": "shared/shapes/train/"})
    # what it may not: write there, read a neighbour under shared/, read other runs' data
    assert not _can(role, region, "s3:PutObject", f"{obj}/shared/shapes/train/x.rec")
    assert not _can(role, region, "s3:GetObject", f"{obj}/shared/other/train/x.rec")
    for key in (
        f"finetune/checkpoints/{OTHER}/epoch-1/params",
        f"finetune/output/{job_name(OTHER)}/output/model.tar.gz",
        f"finetune/runs/{OTHER}/model/model.pt",
    ):
        assert not _can(role, region, "s3:GetObject", f"{obj}/{key}")


@pytest.mark.parametrize("kind", ["sagemaker", "ec2"])
def test_the_boundary_lets_shared_be_read_never_written(kind):
    b, obj = _boundary("eu-west-1", kind), f"arn:aws:s3:::{BUCKET}"
    everything = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    ctx = {"aws:EC2InstanceSourceVPC": "vpc-1", **INSTANCE} if kind == "ec2" else AS_SAGEMAKER
    assert allowed(everything, Request("s3:GetObject", f"{obj}/shared/a/x", ctx), b)
    for action in ("s3:PutObject", "s3:DeleteObject"):
        assert not allowed(everything, Request(action, f"{obj}/shared/a/x", ctx), b)
    assert not allowed(everything, Request("s3:GetObject", f"{obj}/elsewhere/x", ctx), b)


def test_the_hint_names_a_prefix_the_boundary_allows():
    with pytest.raises(UsageError) as err:
        read_prefixes(f"s3://{BUCKET}/mine/d1/", BUCKET)
    hinted = str(err.value).split("--read-prefix ")[-1].split(" ")[0].replace("NAME", "d1")
    assert hinted == f"s3://{BUCKET}/shared/d1/"
    reads = read_prefixes(hinted, BUCKET, (hinted,))
    role = _sagemaker_role("eu-west-1", reads)
    assert _can(role, "eu-west-1", "s3:GetObject", f"arn:aws:s3:::{BUCKET}/shared/d1/train/x.rec")
    # a prefix the boundary does not let runs read is refused up front, with the way out
    with pytest.raises(UsageError, match="outside what a run may read") as err:
        read_prefixes(f"s3://{BUCKET}/mine/d1/", BUCKET, (f"s3://{BUCKET}/mine/",))
    assert f"s3://{BUCKET}/shared/NAME/" in str(err.value)


def _eni(region: str, what: str) -> str:
    return f"arn:{PARTITIONS[region]}:ec2:{region}:{ACCOUNT}:{what}"


@pytest.mark.parametrize("region", list(PARTITIONS))
def test_a_vpc_job_gets_its_network_interfaces_only_when_asked(region):
    role = _sagemaker_role(region, ["finetune/datasets/d/"], network=((SUBNET,), (GROUP,)))
    ctx = {"aws:RequestedRegion": region}
    ours = {
        "ec2:Vpc": _eni(region, f"vpc/{VPC_ID}"),
        "ec2:Subnet": _eni(region, f"subnet/{SUBNET}"),
    }
    for target in ("network-interface/eni-1", f"subnet/{SUBNET}", f"security-group/{GROUP}"):
        assert _can(role, region, "ec2:CreateNetworkInterface", _eni(region, target), **ours)
    manage = ("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
              "ec2:DeleteNetworkInterfacePermission")  # fmt: skip
    for action in manage:
        assert _can(role, region, action, _eni(region, "network-interface/eni-1"), **ours)
        # another workload's interface: in another subnet of the VPC, or in another VPC
        elsewhere = {**ours, "ec2:Subnet": _eni(region, "subnet/subnet-0ther")}
        assert not _can(role, region, action, _eni(region, "network-interface/eni-2"), **elsewhere)
        foreign = {**ours, "ec2:Vpc": _eni(region, "vpc/vpc-0ther")}
        assert not _can(role, region, action, _eni(region, "network-interface/eni-1"), **foreign)
    for action in (
        "ec2:DescribeDhcpOptions",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeSubnets",
        "ec2:DescribeVpcs",
    ):
        assert _can(role, region, action, "*", **ctx)
        assert not _can(role, region, action, "*", **{"aws:RequestedRegion": "us-west-2"})
    # not into other subnets or groups, nothing else of EC2
    assert not _can(role, region, "ec2:CreateNetworkInterface", _eni(region, "subnet/subnet-9"))
    assert not _can(role, region, "ec2:CreateNetworkInterface", _eni(region, "security-group/sg-9"))
    assert not _can(role, region, "ec2:RunInstances", _eni(region, "instance/*"))
    assert not _can(
        role, region, "ec2:AttachNetworkInterface", _eni(region, "network-interface/eni-1")
    )
    plain = _sagemaker_role(region, ["finetune/datasets/d/"])
    assert not _can(plain, region, "ec2:CreateNetworkInterface", _eni(region, f"subnet/{SUBNET}"))
    assert not _can(plain, region, "ec2:DescribeSubnets", "*", **ctx)


def _key(region: str, key_id: str = KEY_ID) -> str:
    return f"arn:{PARTITIONS[region]}:kms:{region}:{ACCOUNT}:key/{key_id}"


@pytest.mark.parametrize("region", list(PARTITIONS))
@pytest.mark.parametrize("given", ["arn", "id", "alias"])
def test_an_encrypted_job_uses_its_key_only_when_asked(region, given):
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    kms_key = {"arn": _key(region), "id": KEY_ID, "alias/finetune": "alias/finetune"}.get(
        given, "alias/finetune"
    )
    role = _sagemaker_role(region, ["finetune/datasets/d/"], kms_key=kms_key)
    aliases = {"kms:ResourceAliases": ["alias/finetune"]} if given == "alias" else {}
    via_s3 = {"kms:ViaService": f"s3.{region}.{suffix}", **aliases}
    via_sm = {"kms:ViaService": f"sagemaker.{region}.{suffix}", **aliases}
    for action in ("kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt"):
        assert _can(role, region, action, _key(region), **via_s3)
        assert _can(role, region, action, _key(region), **via_sm)
        assert not _can(role, region, action, _key(region), **aliases)  # directly: boundary denies
    grant = {"kms:GrantIsForAWSResource": "true", **aliases}
    assert _can(role, region, "kms:CreateGrant", _key(region), **grant)
    assert not _can(
        role,
        region,
        "kms:CreateGrant",
        _key(region),
        **{**grant, "kms:GrantIsForAWSResource": "false"},
    )
    if given != "alias":  # another key of the account
        assert not _can(role, region, "kms:Decrypt", _key(region, "ffff"), **via_s3)
    else:
        assert not _can(
            role,
            region,
            "kms:Decrypt",
            _key(region),
            **{**via_s3, "kms:ResourceAliases": ["alias/x"]},
        )
    for action in ("kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:ReEncryptFrom"):
        assert not _can(role, region, action, _key(region), **via_s3)
    plain = _sagemaker_role(region, ["finetune/datasets/d/"])
    assert not _can(plain, region, "kms:Decrypt", _key(region), **via_s3)


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1"])
def test_every_arn_shipped_is_in_the_regions_partition(region):
    p = PARTITIONS[region]
    docs = {
        "boundary": _boundary(region),
        "ec2-boundary": _boundary(region, "ec2"),
        "sagemaker-role": _sagemaker_role(
            region, ["finetune/datasets/d/"], network=((SUBNET,), (GROUP,)), kms_key=KEY_ID
        ),
        "ec2-role": _ec2_role(region, ["finetune/datasets/d/"]),
        **{
            k: infra.render(infra.policy_document(k), infra.Names(ACCOUNT, region, BUCKET))
            for k in ("caller", "ec2-caller")
        },
    }
    for name, doc in docs.items():
        text = json.dumps(doc)
        assert "arn:aws:" not in text, name
        assert f"arn:{p}:" in text, name
    role = docs["sagemaker-role"]
    obj = f"arn:{p}:s3:::{BUCKET}/finetune"
    assert _can(role, region, "s3:PutObject", f"{obj}/checkpoints/{RUN}/epoch-1/params")
    assert _can(role, region, "s3:GetObject", f"{obj}/datasets/d/train/x.rec")
    group = f"arn:{p}:logs:{region}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
    log = f"{group}:log-stream:{job_name(RUN)}/algo-1-1763790000"
    assert _can(role, region, "logs:PutLogEvents", log)
    repo = f"arn:{p}:ecr:{region}:{ACCOUNT}:repository/finetune"
    assert _can(role, region, "ecr:BatchGetImage", repo)
    assert _can(docs["ec2-role"], region, "ecr:BatchGetImage", repo)
    assert runrole.role_arn(ACCOUNT, RUN, p).startswith(f"arn:{p}:iam::")
    for kind in ("ec2", "sagemaker"):
        assert infra.boundary_arn(ACCOUNT, region, kind).startswith(f"arn:{p}:iam::")


def test_the_ssm_policy_attached_to_ec2_roles_is_in_the_regions_partition():
    import boto3

    from finetune.backends.ec2.setup.profile import ssm_core_policy

    for region, p in PARTITIONS.items():
        iam = boto3.client(
            "iam", region_name=region, aws_access_key_id="x", aws_secret_access_key="y"
        )
        assert ssm_core_policy(iam) == f"arn:{p}:iam::aws:policy/AmazonSSMManagedInstanceCore"


@pytest.mark.parametrize("caller", ["caller", "ec2-caller"])
def test_the_caller_reads_a_shared_datasets_manifest_before_launching(caller):
    """finetune checks an S3 dataset (its manifest, its files) with the caller's credentials
    before it launches (finetune.backends.s3dataset): shared/ must be readable there too."""
    names = infra.Names(ACCOUNT, "eu-west-1", BUCKET)
    policy = infra.render(infra.policy_document(caller), names)
    obj = f"arn:aws:s3:::{BUCKET}"
    assert allowed(policy, Request("s3:GetObject", f"{obj}/shared/shapes/train/manifest.json"))
    assert not allowed(policy, Request("s3:PutObject", f"{obj}/shared/shapes/train/x.rec"))
    assert not allowed(policy, Request("s3:GetObject", f"{obj}/mine/shapes/train/manifest.json"))
