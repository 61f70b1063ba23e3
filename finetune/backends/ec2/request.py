"""The RunInstances request of one EC2 attempt, built purely from values (no AWS calls).

What every instance gets, and why:
- IMDSv2 required, hop limit 2: tokens defeat SSRF credential theft; the container on
  Docker's bridge network is one hop further away and still reaches the service.
- InstanceInitiatedShutdownBehavior=terminate + a dead-man switch in the user data: the
  instance ends itself after --max-runtime plus a margin, whatever happens on it.
- An encrypted gp3 root volume, deleted with the instance; tags on instance and volume (and
  the spot request) naming project, run id, attempt and owner (and the launching session's
  aws:userid, which the caller policy enforces), so `finetune cleanup` finds all.
- A security group without inbound rules (Session Manager for access; a multi-host run's group
  allows TCP from itself only) and an instance profile limited to the run's own S3 prefixes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from importlib import resources

from finetune.aws import imageref
from finetune.engines import registry

PROJECT_TAG = ("project", "finetune")
RUN_TAG = "finetune:run-id"
ATTEMPT_TAG = "finetune:attempt"
OWNER_TAG = "finetune:owner"
# who launched or made it (aws:userid): the caller policy denies any other value at creation,
# and finetune adopts an instance or a cluster group only with its own run id and this id
OWNER_ID_TAG = "finetune:owner-id"
HOST_TAG = "finetune:host"  # algo-K, K = 1 + the instance's AmiLaunchIndex (multi-host runs)
DEADMAN_MARGIN_S = 15 * 60  # start-up, image pull and the final upload on top of the runtime
TEMPLATE = "userdata.sh.tmpl"  # values, dead-man switch, helpers; then the engine's body:
DOCKER_BODY = "userdata-docker.sh.tmpl"  # our image (Dockerfile) on the Deep Learning Base AMI
DLAMI_BODY = "userdata-dlami.sh.tmpl"  # our wheel into a framework Deep Learning AMI's env
# IMDS response hop limit per body: a container on Docker's bridge network is one hop further
# from IMDS than its host (2); with no container, or a container on the host's network
# (several hosts), 1 keeps the instance's credentials from anything it forwards packets for.
HOP_LIMITS = {DOCKER_BODY: 2, DLAMI_BODY: 1}


def body(engine: str) -> str:
    """The user data's body for ``engine``: our image where it needs ours, else the DLAMI's."""
    return DOCKER_BODY if registry.get(engine).needs_our_image else DLAMI_BODY


@dataclass(frozen=True)
class LaunchSpec:
    """Everything one RunInstances call needs."""

    run_id: str
    attempt: int
    instance_type: str
    spot: bool
    subnet_id: str
    security_group_id: str
    ami: str
    root_device: str
    instance_profile: str
    owner: str
    region: str
    image: str  # the training image (ECR URI)
    bucket: str
    run_prefix: str
    dataset_uri: str
    max_runtime_s: int
    upload_interval_s: int = 30
    volume_gib: int = 100
    count: int = 1  # instances of this attempt (one RunInstances, all or nothing)
    engine: str = registry.DEFAULT  # picks the user data's body (body)
    wheel_uri: str = ""  # torch: our wheel in the run's S3 prefix
    wheel_sha256: str = ""  # torch: its digest, checked before pip sees it
    plan_sha256: str = ""  # plan.json's digest as the launch wrote it (the agent checks it)
    python: str = ""  # torch: the AMI's PyTorch interpreter (finetune.backends.ec2.setup.ami)
    metrics_lock: str = ""  # torch, loggers named: the wheel's hashed list of their packages
    owner_id: str = ""  # the launching session's aws:userid (OWNER_ID_TAG)

    @property
    def deadman_s(self) -> int:
        return int(self.max_runtime_s) + DEADMAN_MARGIN_S


def render_user_data(spec: LaunchSpec) -> str:
    """The bootstrap script: the template with every value shell-quoted."""
    values = {
        "RUN_ID": spec.run_id,
        "ATTEMPT": str(spec.attempt),
        "REGION": spec.region,
        "IMAGE": spec.image,
        "BUCKET": spec.bucket,
        "RUN_PREFIX": spec.run_prefix,
        "DATASET_URI": spec.dataset_uri,
        "UPLOAD_INTERVAL": str(spec.upload_interval_s),
        "DEADMAN_SECONDS": str(spec.deadman_s),
        "HOSTS": str(spec.count),
        # several hosts: the parameter-server ports must be reachable from the other hosts
        "NETWORK": network(spec),
        "WHEEL_URI": spec.wheel_uri,
        # the run's prefix is writable by the run itself: what the boot runs from there must
        # match what the launch wrote (user data: only RunInstances sets it)
        "WHEEL_SHA256": spec.wheel_sha256,
        "PLAN_SHA256": spec.plan_sha256,
        "PYTHON": spec.python,
        "METRICS_LOCK": spec.metrics_lock,
    }
    folder = resources.files("finetune.backends.ec2")
    text = "".join(
        folder.joinpath(name).read_text(encoding="utf-8") for name in (TEMPLATE, body(spec.engine))
    )
    out = re.sub(r"\{\{([A-Z][A-Z0-9_]*)\}\}", lambda m: shlex.quote(values[m[1]]), text)
    if len(out.encode()) > 16 * 1024:  # EC2's limit for user data (before base64)
        raise ValueError("the rendered user data exceeds EC2's 16 KiB limit")
    return out


def network(spec: LaunchSpec) -> str:
    """The container's network: the host's where several hosts reach each other's ports."""
    return "host" if spec.count > 1 else "bridge"


def hop_limit(spec: LaunchSpec) -> int:
    """IMDS's hop limit: 2 only for a container on Docker's bridge network."""
    bridged = body(spec.engine) == DOCKER_BODY and network(spec) == "bridge"
    return HOP_LIMITS[DOCKER_BODY] if bridged else HOP_LIMITS[DLAMI_BODY]


def tags(spec: LaunchSpec) -> list[dict[str, str]]:
    pairs = [
        PROJECT_TAG,
        (RUN_TAG, spec.run_id),
        (ATTEMPT_TAG, str(spec.attempt)),
        (OWNER_TAG, spec.owner),
        ("Name", f"finetune {spec.run_id} #{spec.attempt}"),
    ] + ([(OWNER_ID_TAG, spec.owner_id)] if spec.owner_id else [])
    return [{"Key": k, "Value": v[:256]} for k, v in pairs]


def run_instances_kwargs(spec: LaunchSpec, token: str) -> dict:
    """The RunInstances parameters for ``spec``."""
    resource_types = ["instance", "volume"] + (["spot-instances-request"] if spec.spot else [])
    kwargs = dict(
        ImageId=spec.ami,
        InstanceType=spec.instance_type,
        MinCount=spec.count,  # all or nothing: half a cluster cannot train
        MaxCount=spec.count,
        SubnetId=spec.subnet_id,
        SecurityGroupIds=[spec.security_group_id],
        IamInstanceProfile={"Name": spec.instance_profile},
        UserData=render_user_data(spec),
        InstanceInitiatedShutdownBehavior="terminate",
        MetadataOptions={
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": hop_limit(spec),
            "HttpEndpoint": "enabled",
        },
        BlockDeviceMappings=[
            {
                "DeviceName": spec.root_device,
                "Ebs": {
                    "VolumeSize": spec.volume_gib,
                    "VolumeType": "gp3",
                    "Encrypted": True,
                    "DeleteOnTermination": True,
                },
            }
        ],
        TagSpecifications=[{"ResourceType": t, "Tags": tags(spec)} for t in resource_types],
        ClientToken=token,
    )
    if spec.spot:
        kwargs["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            },
        }
    return kwargs


def instance_policy(
    bucket: str, run_prefix: str, read_prefixes, image: str, partition: str = "aws"
) -> dict:
    """The instance role's only permissions: read the dataset (``read_prefixes``: one key
    prefix or several, see finetune.aws.datasetscope), read/write the run's prefix, pull the
    training image. (Session Manager access comes from AWS's managed policy.) ``partition``:
    the region's (finetune.aws.session.partition_of), so China and GovCloud ARNs match."""
    reads = [read_prefixes] if isinstance(read_prefixes, str) else list(read_prefixes)
    repo = _ecr_repository_arn(image)
    s3 = f"arn:{partition}:s3:::{bucket}"
    statements = [
        _allow("ReadDataset", ["s3:GetObject"], [f"{s3}/{r}*" for r in reads]),
        _allow(
            "RunPrefix",
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            [f"{s3}/{run_prefix}*"],
        ),
        _allow("ListOwnPrefixes", ["s3:ListBucket"], [s3])
        | {"Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in (run_prefix, *reads)]}}},
        _allow("EcrLogin", ["ecr:GetAuthorizationToken"], ["*"]),
    ]
    if repo:
        actions = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]
        statements.append(_allow("PullImage", actions, [repo]))
    return {"Version": "2012-10-17", "Statement": statements}


def _allow(sid: str, actions: list[str], resources_: list[str]) -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources_}


def _ecr_repository_arn(image: str) -> str | None:
    """The ARN of the ECR repository ``image`` is pulled from (None: no ECR image). A tag or
    digest may be missing: the agent's ``docker pull`` then takes ``:latest``."""
    ref = imageref.parse(image, untagged=True)
    return ref.repository_arn if ref else None
