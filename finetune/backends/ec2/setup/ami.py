"""The machine image of an EC2 run, per engine, and the wheel the torch engine installs on it.

torch  AWS's PyTorch Deep Learning AMI for the framework version of the engine table
       (finetune.catalog.engines: 2.10), current build: its public SSM parameter
           /aws/service/deeplearning/ami/ARCH/oss-nvidia-driver-gpu-pytorch-2.10-ubuntu-24.04/latest/ami-id
       (AWS's rule: the AMI's name without "Deep Learning" and "AMI", lower case, hyphenated),
       else, where that parameter cannot be read, the newest Amazon-owned image named
           Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.10 (Ubuntu 24.04) *
       Its PyTorch environment is /opt/pytorch (the AMI's release notes: python_location).
mxnet  the Deep Learning Base GPU AMI (driver + Docker) running our image (infra.resolve_ami).
--ami  replaces either.
"""

from __future__ import annotations

from dataclasses import dataclass

from finetune.backends.ec2.setup import infra as ec2_infra
from finetune.errors import ConfigError

PYTHON = "/opt/pytorch/bin/python"
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
    python: str = ""  # torch: the interpreter that runs the agent and the trainer

    def record(self) -> dict[str, str]:
        """What the plan records of the AMI an attempt ran on."""
        return {"ami": self.ami_id, "ami_name": self.name, "ami_source": self.source}


def framework_version() -> str:
    """'2.10': the PyTorch version of the engine table, as DLAMI names carry it."""
    from finetune.catalog import engines

    return ".".join(engines.build("torch").version.split(".")[:2])


def pytorch_parameter(arch: str) -> str:
    return (
        f"/aws/service/deeplearning/ami/{arch}/"
        f"oss-nvidia-driver-gpu-pytorch-{framework_version()}-{OS}/latest/ami-id"
    )


def pytorch_name_filter(arch: str) -> str:
    return (
        f"Deep Learning {_ARCH_NAME.get(arch, '')}OSS Nvidia Driver AMI GPU PyTorch "
        f"{framework_version()} (Ubuntu 24.04) *"
    )


def resolve(ssm, ec2, arch: str, engine: str, override: str | None) -> AmiChoice:
    """The AMI for ``engine`` on ``arch`` instances (``override``: --ami)."""
    python = PYTHON if engine == "torch" else ""
    if override or engine != "torch":
        ami, root = ec2_infra.resolve_ami(ssm, ec2, arch, override)
        source = "--ami" if override else ec2_infra.AMI_PARAMETERS.get(arch, "")
        return AmiChoice(ami, root, _name(ec2, ami), source, engine, python)
    parameter = pytorch_parameter(arch)
    try:
        ami = ec2_infra.call(ssm.get_parameter, Name=parameter)["Parameter"]["Value"]
    except Exception as exc:
        if ec2_infra.error_code(exc) not in _NOT_READABLE:
            raise ec2_infra.cloud_error(exc, f"the AMI lookup {parameter}", "pass --ami.") from None
        return _by_name(ec2, arch)
    ami, root = ec2_infra.resolve_ami(ssm, ec2, arch, ami)
    return AmiChoice(ami, root, _name(ec2, ami), f"SSM {parameter}", engine, python)


def _by_name(ec2, arch: str) -> AmiChoice:
    """The newest available Amazon-owned PyTorch DLAMI by name (no SSM parameter to read)."""
    pattern = pytorch_name_filter(arch)
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
            f"no PyTorch Deep Learning AMI named {pattern!r} in this region",
            "pass --ami with a PyTorch DLAMI of this region (`aws ec2 describe-images "
            "--owners amazon --filters Name=name,Values='Deep Learning*PyTorch*'`).",
        )
    newest = max(found, key=lambda i: i.get("CreationDate", ""))
    root = newest.get("RootDeviceName") or "/dev/sda1"
    return AmiChoice(
        newest["ImageId"], root, newest.get("Name", ""), f"name {pattern!r}", "torch", PYTHON
    )


def _name(ec2, ami: str) -> str:
    try:
        images = ec2_infra.call(ec2.describe_images, ImageIds=[ami])["Images"]
    except Exception:  # the id was just described: a name is only for the record
        return ""
    return images[0].get("Name", "") if images else ""


def runtime(engine: str, arch: str = "x86_64", override: str | None = None) -> dict[str, str]:
    """What will run the engine, for the plan (the AMI id itself is looked up at launch)."""
    from finetune.catalog import engines

    if override:
        ami = override
    elif engine == "torch":
        ami = f"PyTorch Deep Learning AMI from SSM {pytorch_parameter(arch)}"
    else:
        ami = f"Deep Learning Base GPU AMI from SSM {ec2_infra.AMI_PARAMETERS.get(arch)}"
    how = f"our wheel into {PYTHON}" if engine == "torch" else "our image (Docker)"
    return {"engine": engine, "ami": ami, "runs": how, "needs": engines.needs(engine)}


def upload_wheel(s3, bucket: str, run_prefix: str) -> tuple[str, str]:
    """Our package as a wheel in the run's prefix; returns its s3:// URI and sha256 (the user
    data checks the download against it: the run's own role may write its prefix)."""
    from finetune.backends import shipping

    name, data = shipping.wheel()
    key = f"{run_prefix}{WHEELS}{name}"
    try:
        ec2_infra.call(s3.put_object, Bucket=bucket, Key=key, Body=data)
    except Exception as exc:
        raise ec2_infra.cloud_error(exc, f"uploading s3://{bucket}/{key}") from None
    return f"s3://{bucket}/{key}", shipping.sha256_hex(data)
