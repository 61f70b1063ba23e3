"""The machine image of an EC2 run, per engine (its descriptor's ``aws``: see
finetune.engines.registry), and the wheel such an engine installs on it.

An engine whose framework AWS keeps (torch today) runs on AWS's Deep Learning AMI of that
framework at the engine's build version (2.10): the current build, from its public SSM parameter
/aws/service/deeplearning/ami/ARCH/oss-nvidia-driver-gpu-pytorch-2.10-ubuntu-24.04/latest/ami-id
(AWS's rule: the AMI's name without "Deep Learning" and "AMI", lower case, hyphenated), else the
newest Amazon-owned image named "Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.10 (Ubuntu
24.04) *"; our wheel goes into the framework's environment there (AwsFramework.python). An
engine on our image (mxnet today) runs it on the Deep Learning Base GPU AMI (driver + Docker,
infra.resolve_ami). --ami replaces either.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.backends import shipping
from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.catalog import engines
from finetune.engines import registry
from finetune.errors import ConfigError

OS = "ubuntu-24.04"
WHEELS = "code/"  # under the run's prefix (the instance role may read the whole prefix)
_ARCH_NAME = {"x86_64": "", "arm64": "ARM64 "}  # AWS names its arm64 DLAMIs "... ARM64 AMI ..."
_NOT_READABLE = {"ParameterNotFound", "AccessDeniedException", "AccessDenied"}


@dataclass(frozen=True)
class AmiChoice:
    """The image an attempt runs on, and how it was found (recorded with the run)."""

    ami_id: str
    root_device: str
    name: str
    source: str  # the SSM parameter, the name filter, or --ami
    engine: str
    python: str = ""  # an AWS framework AMI: the interpreter of the agent and the trainer

    def record(self) -> dict[str, str]:
        """What the plan records of the AMI an attempt ran on."""
        return {"ami": self.ami_id, "ami_name": self.name, "ami_source": self.source}


def _aws(engine: str):
    """The AWS framework environment of ``engine`` (None: it runs our image)."""
    return registry.get(engine).aws


def framework_parameter(engine: str, arch: str) -> str:
    """The public SSM parameter of the current AMI of ``engine``'s framework build."""
    version = registry.get(engine).build.minor  # '2.10', as DLAMI names carry it
    return (
        f"/aws/service/deeplearning/ami/{arch}/"
        f"oss-nvidia-driver-gpu-{_aws(engine).ami_slug}-{version}-{OS}/latest/ami-id"
    )


def framework_name_filter(engine: str, arch: str) -> str:
    version = registry.get(engine).build.minor
    return (
        f"Deep Learning {_ARCH_NAME.get(arch, '')}OSS Nvidia Driver AMI GPU "
        f"{_aws(engine).ami_title} {version} (Ubuntu 24.04) *"
    )


def resolve(ssm, ec2, arch: str, engine: str, override: str | None) -> AmiChoice:
    """The AMI for ``engine`` on ``arch`` instances (``override``: --ami)."""
    aws = _aws(engine)
    python = aws.python if aws else ""
    if override or aws is None:
        ami, root = ec2_infra.resolve_ami(ssm, ec2, arch, override)
        source = "--ami" if override else ec2_infra.AMI_PARAMETERS.get(arch, "")
        return AmiChoice(ami, root, _name(ec2, ami), source, engine, python)
    parameter = framework_parameter(engine, arch)
    try:
        ami = ec2_infra.call(ssm.get_parameter, Name=parameter)["Parameter"]["Value"]
    except Exception as exc:
        if ec2_infra.error_code(exc) not in _NOT_READABLE:
            raise ec2_infra.cloud_error(exc, f"the AMI lookup {parameter}", "pass --ami.") from None
        return _by_name(ec2, arch, engine)
    ami, root = ec2_infra.resolve_ami(ssm, ec2, arch, ami)
    return AmiChoice(ami, root, _name(ec2, ami), f"SSM {parameter}", engine, python)


def _by_name(ec2, arch: str, engine: str) -> AmiChoice:
    """The newest available Amazon-owned framework DLAMI by name (no SSM parameter to read)."""
    aws = _aws(engine)
    pattern = framework_name_filter(engine, arch)
    filters = [
        {"Name": "name", "Values": [pattern]},
        {"Name": "state", "Values": ["available"]},
        {"Name": "architecture", "Values": [arch]},
    ]
    try:
        found = ec2_infra.call(ec2.describe_images, Owners=["amazon"], Filters=filters)["Images"]
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"finding the AMI {pattern!r}", "pass --ami.") from None
    if not found:
        raise ConfigError(
            f"no {aws.ami_title} Deep Learning AMI named {pattern!r} in this region",
            f"pass --ami with a {aws.ami_title} DLAMI of this region (`aws ec2 describe-images "
            f"--owners amazon --filters Name=name,Values='Deep Learning*{aws.ami_title}*'`).",
        )
    newest = max(found, key=lambda i: i.get("CreationDate", ""))
    root = newest.get("RootDeviceName") or "/dev/sda1"
    return AmiChoice(
        newest["ImageId"], root, newest.get("Name", ""), f"name {pattern!r}", engine, aws.python
    )


def _name(ec2, ami: str) -> str:
    try:
        images = ec2_infra.call(ec2.describe_images, ImageIds=[ami])["Images"]
    except Exception:  # the id was just described: a name is only for the record
        return ""
    return images[0].get("Name", "") if images else ""


def runtime(engine: str, arch: str = "x86_64", override: str | None = None) -> dict[str, str]:
    """What will run the engine, for the plan (the AMI id itself is looked up at launch)."""
    aws = _aws(engine)
    if override:
        ami = override
    elif aws:
        ami = f"{aws.ami_title} Deep Learning AMI from SSM {framework_parameter(engine, arch)}"
    else:
        ami = f"Deep Learning Base GPU AMI from SSM {ec2_infra.AMI_PARAMETERS.get(arch)}"
    how = f"our wheel into {aws.python}" if aws else "our image (Docker)"
    return {"engine": engine, "ami": ami, "runs": how, "needs": engines.needs(engine)}


def upload_wheel(s3, bucket: str, run_prefix: str) -> tuple[str, str]:
    """Our package as a wheel in the run's prefix; returns its s3:// URI and sha256 (the user
    data checks the download against it: the run's own role may write its prefix)."""
    name, data = shipping.wheel()
    key = f"{run_prefix}{WHEELS}{name}"
    try:
        ec2_infra.call(s3.put_object, Bucket=bucket, Key=key, Body=data)
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"uploading s3://{bucket}/{key}") from None
    return f"s3://{bucket}/{key}", shipping.sha256_hex(data)
