"""The AWS pieces around an EC2 run: clients, AMI, subnets, security group, and finding or
terminating the instances a run owns (a run's IAM role and instance profile: profile.py).
boto3 is imported only in here."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

from finetune.aws import retries
from finetune.aws.errors import translate
from finetune.aws.retries import error_code as code
from finetune.aws.session import configured_region, connect
from finetune.backends.ec2.request import OWNER_ID_TAG, PROJECT_TAG, RUN_TAG
from finetune.errors import CloudError, ConfigError

if TYPE_CHECKING:  # boto3 is imported only when a call is made
    from finetune.aws.session import Aws

AMI_PARAMETERS = {  # AWS Deep Learning Base GPU AMIs (NVIDIA driver + Docker), public SSM
    "x86_64": "/aws/service/deeplearning/ami/x86_64/"
    "base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id",
    "arm64": "/aws/service/deeplearning/ami/arm64/"
    "base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id",
}
SECURITY_GROUP = "finetune-no-ingress"
LIVE_STATES = ["pending", "running", "stopping", "stopped"]


class Clients:
    """boto3 clients of one backend object, per region (finetune.aws.session underneath:
    one attempt per call; retries are ours, through ``call``)."""

    def __init__(self, region: str | None = None) -> None:
        self._aws: dict[str, Aws] = {}
        self.region = region  # --region: where calls go unless one names another

    def __call__(self, service: str, region: str | None = None):
        region = region or region_name(self.region)
        if region not in self._aws:
            self._aws[region] = connect(region)
        return self._aws[region].client(service)


def region_name(region: str | None = None) -> str:
    """``region`` (--region), else FINETUNE_REGION, else the AWS configuration's region (a
    CloudError says how to set one)."""
    return configured_region(region) or connect().region


def call(fn, **kwargs):
    """One AWS call with finetune's bounded retries (throttling, 5xx, broken connections)."""
    return retries.call(fn, **kwargs)


def error_code(exc: BaseException | None) -> str:
    return code(exc) if exc is not None else ""


def cloud_error(exc: Exception, doing: str, fix: str | None = None) -> Exception:
    """A boto3 failure as a CloudError (finetune.aws.errors) saying what we were doing;
    ``fix`` replaces the generic advice where we know better."""
    err = translate(exc, doing)
    if not isinstance(err, CloudError):
        err = CloudError(f"{doing} failed: {exc}", "check the network and AWS, then try again.")
    if fix and isinstance(err, CloudError) and type(err) is CloudError:
        err.fix = fix
    return err


def resolve_ami(ssm, ec2, architecture: str, override: str | None) -> tuple[str, str]:
    """(AMI id, root device name): --ami, else the current Deep Learning Base GPU AMI."""
    ami = override
    if not ami:
        name = AMI_PARAMETERS.get(architecture)
        if not name:
            raise ConfigError(f"no Deep Learning AMI for {architecture}", "pass --ami AMI_ID.")
        try:
            ami = call(ssm.get_parameter, Name=name)["Parameter"]["Value"]
        except Exception as exc:
            raise cloud_error(exc, f"the AMI lookup {name}", "pass --ami AMI_ID.") from None
    try:
        images = call(ec2.describe_images, ImageIds=[ami])["Images"]
    except Exception as exc:
        raise cloud_error(exc, f"describing AMI {ami}", "pass a valid --ami.") from None
    if not images:
        raise ConfigError(f"AMI {ami} does not exist in this region", "pass a valid --ami.")
    return ami, images[0].get("RootDeviceName") or "/dev/xvda"


def subnets(ec2, subnet_ids: tuple[str, ...], azs: tuple[str, ...], vpc=None) -> list[dict]:
    """Subnets to try in order: the given ones, else ``vpc``'s (the stack's VpcId) or the
    default VPC's (of the given AZs)."""
    filters = [
        {"Name": "vpc-id", "Values": [vpc]}
        if vpc
        else {"Name": "default-for-az", "Values": ["true"]}
    ]
    if azs:
        filters.append({"Name": "availability-zone", "Values": list(azs)})
    try:
        if subnet_ids:
            found = call(ec2.describe_subnets, SubnetIds=list(subnet_ids))["Subnets"]
        else:
            found = call(ec2.describe_subnets, Filters=filters)["Subnets"]
    except Exception as exc:
        raise cloud_error(exc, "describing subnets", "check --subnet / --az.") from None
    if not found:
        raise ConfigError(
            "no subnet to launch into" + (f" in {', '.join(azs)}" if azs else ""),
            "pass --subnet SUBNET_ID (this region has no default VPC subnet there).",
        )
    order = {s: i for i, s in enumerate(subnet_ids or ())}
    azo = {a: i for i, a in enumerate(azs or ())}
    key = (
        (lambda s: order[s["SubnetId"]])
        if subnet_ids
        else (lambda s: (azo.get(s["AvailabilityZone"], 0), s["AvailabilityZone"]))
    )
    return sorted(found, key=key)


def security_group(ec2, vpc_id: str) -> str:
    """The VPC's finetune group: no inbound rules at all (reach instances with Session Manager)."""
    flt = [
        {"Name": "vpc-id", "Values": [vpc_id]},
        {"Name": "group-name", "Values": [SECURITY_GROUP]},
    ]
    try:
        groups = call(ec2.describe_security_groups, Filters=flt)["SecurityGroups"]
        if not groups:
            created = create_group(ec2, lambda: _create_group(ec2, vpc_id))
            if created is None:  # it exists after all: find it again
                groups = call(ec2.describe_security_groups, Filters=flt)["SecurityGroups"]
            groups = [created] if created else groups
    except Exception as exc:
        raise cloud_error(exc, f"the security group {SECURITY_GROUP} in {vpc_id}") from None
    if not groups:
        raise CloudError(
            f"EC2 said {SECURITY_GROUP} exists in {vpc_id} but does not list it",
            "wait a minute and run the command again.",
        )
    group = groups[0]
    if group.get("IpPermissions"):
        raise CloudError(
            f"security group {group['GroupId']} ({SECURITY_GROUP}) has inbound rules",
            "remove them: finetune instances accept no inbound traffic (use Session Manager).",
        )
    return group["GroupId"]


def _create_group(ec2, vpc_id: str) -> dict:
    """A new group has no inbound rules (and AWS's default allow-all outbound: S3, ECR)."""
    tags = [{"Key": PROJECT_TAG[0], "Value": PROJECT_TAG[1]}]
    gid = ec2.create_security_group(
        GroupName=SECURITY_GROUP,
        Description="finetune training instances: no inbound access",
        VpcId=vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    return {"GroupId": gid, "IpPermissions": [], "Tags": tags}


def create_group(ec2, create) -> dict | None:
    """``create()`` (a CreateSecurityGroup) with our retries; None when the group turned out
    to exist already (a retry after a reply that was lost, or another launch's at the same
    moment): the caller finds it again by name."""
    try:
        return call(create)
    except Exception as exc:
        if error_code(exc) == "InvalidGroup.Duplicate":
            return None
        raise


def find_instances(
    ec2, run_id: str | None = None, attempt: int | None = None, states=None, owner_id=None
):
    """Instances tagged by finetune (of one run / attempt), in ``states`` (default: live);
    with ``owner_id``, only those its session launched (finetune:owner-id, which the caller
    policy lets no one else set): what finetune may take for its own attempt."""
    filters = [
        {"Name": f"tag:{PROJECT_TAG[0]}", "Values": [PROJECT_TAG[1]]},
        {"Name": "instance-state-name", "Values": list(states or LIVE_STATES)},
    ]
    if run_id:
        filters.append({"Name": f"tag:{RUN_TAG}", "Values": [run_id]})
    if attempt is not None:
        filters.append({"Name": "tag:finetune:attempt", "Values": [str(attempt)]})
    if owner_id is not None:
        filters.append({"Name": f"tag:{OWNER_ID_TAG}", "Values": [owner_id]})
    try:
        reservations = _reservations(ec2, Filters=filters)
    except Exception as exc:
        raise cloud_error(exc, "DescribeInstances") from None
    found = [i for r in reservations for i in r["Instances"]]
    return found if owner_id is None else [i for i in found if tag(i, OWNER_ID_TAG) == owner_id]


def tag(resource: dict, key: str) -> str | None:
    """The value of tag ``key`` on a described EC2 resource (None: untagged)."""
    return next((t["Value"] for t in resource.get("Tags") or [] if t["Key"] == key), None)


def _reservations(ec2, **kwargs) -> list[dict]:
    """Every reservation of DescribeInstances, following NextToken, each page retried."""
    out = []
    while True:
        page = call(ec2.describe_instances, **kwargs)
        out += page["Reservations"]
        if not page.get("NextToken"):
            return out
        kwargs["NextToken"] = page["NextToken"]


def describe(ec2, instance_ids: list[str]) -> dict[str, dict]:
    """Instance descriptions by id; ids EC2 no longer knows are simply absent."""
    if not instance_ids:
        return {}
    try:
        reservations = _reservations(ec2, InstanceIds=instance_ids)
        return {i["InstanceId"]: i for r in reservations for i in r["Instances"]}
    except Exception as exc:
        if error_code(exc) == "InvalidInstanceID.NotFound":
            return {}
        raise cloud_error(exc, "describing the run's instances") from None


def terminate(ec2, instance_ids: list[str]) -> None:
    if not instance_ids:
        return
    try:
        call(ec2.terminate_instances, InstanceIds=instance_ids)
    except Exception as exc:
        if error_code(exc) != "InvalidInstanceID.NotFound":
            raise cloud_error(exc, f"terminating {', '.join(instance_ids)}") from None


def account(sts) -> str:
    """The caller's AWS account id (for the permissions boundary's ARN)."""
    try:
        return call(sts.get_caller_identity)["Account"]
    except Exception as exc:
        raise cloud_error(exc, "GetCallerIdentity") from None


def owner_id(sts) -> str:
    """The caller's aws:userid (GetCallerIdentity's UserId: AIDA... for a user,
    AROA...:session for a role session): what the caller policy compares a run's cluster
    group's finetune:owner-id tag with (${aws:userid})."""
    try:
        return call(sts.get_caller_identity)["UserId"]
    except Exception as exc:
        raise cloud_error(exc, "GetCallerIdentity") from None


def owner(sts) -> str:
    """Who launched: the caller's ARN (user or role session), else the local user name."""
    try:
        return sts.get_caller_identity()["Arn"].rsplit(":", 1)[-1]
    except Exception:
        return getpass.getuser()
