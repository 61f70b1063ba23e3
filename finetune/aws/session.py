"""One boto3 session per command: profile and region from the options, then the settings
(FINETUNE_PROFILE, FINETUNE_REGION), then the user's AWS configuration.

Clients make exactly one attempt per call (retries live in ``finetune.aws.retries``) and carry
a finetune user agent. Nothing here runs at import time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from finetune import __version__, settings
from finetune.adaptors import boto3, botocore
from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.settings.names import check_region

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


@dataclass
class Aws:
    """A boto3 session bound to one region, with cached clients and caller identity."""

    session: Any  # boto3.Session
    region: str
    _clients: dict = field(default_factory=dict, repr=False)
    _identity: dict | None = field(default=None, repr=False)

    def client(self, service: str):
        """A client for ``service`` in this region: one attempt per call, our timeouts."""
        if service not in self._clients:
            config = botocore.config.Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=10,
                read_timeout=120,
                user_agent_extra=f"finetune/{__version__}",
            )
            with aws_errors(f"creating the {service} client", region=self.region):
                self._clients[service] = self.session.client(
                    service, region_name=self.region, config=config
                )
        return self._clients[service]

    def identity(self) -> dict:
        """STS GetCallerIdentity (needs no permission): proves the credentials work."""
        if self._identity is None:
            with aws_errors("GetCallerIdentity", region=self.region):
                self._identity = retries.call(self.client("sts").get_caller_identity)
        return self._identity

    @property
    def account_id(self) -> str:
        return str(self.identity()["Account"])

    @property
    def partition(self) -> str:
        return partition_of(self.region)


def connect(region: str | None = None, profile: str | None = None) -> Aws:
    """A session for ``region`` (else FINETUNE_REGION, else the AWS config's region)."""
    _check_flag(region)
    conf = settings.get()
    with aws_errors("opening an AWS session"):
        core = _botocore_session()
        session = boto3.Session(profile_name=profile or conf.profile or None, botocore_session=core)
        core.get_scoped_config()  # an unknown profile fails here, as boto3's own loader did
    paths = _LOADER[0].search_paths  # each boto3.Session appends its data folder again
    paths[:] = list(dict.fromkeys(paths))
    chosen = region or conf.region or session.region_name
    if not chosen:
        with aws_errors("choosing a region"):
            raise botocore.exceptions.NoRegionError()
    return Aws(session=session, region=chosen)


def configured_region(region: str | None = None) -> str | None:
    """The region a command would use, found without credentials or network (for --dry-run)."""
    _check_flag(region)
    conf = settings.get()
    if region or conf.region:
        return region or conf.region
    try:
        return boto3.Session(profile_name=conf.profile or None).region_name
    except Exception:  # no boto3, unknown profile: a dry run just says it does not know
        return None


_LOADER: list = []  # the process's one botocore data loader, shared by its sessions


def _botocore_session():
    """A new botocore session whose service models (static files) come from the process's one
    loader, parsed once; credentials, profile and region stay per session. Why:
    docs/decisions/043-aws-sdk-start-up.md."""
    if not _LOADER:
        _LOADER.append(botocore.loaders.create_loader())
    fresh = botocore.session.Session()
    fresh.register_component("data_loader", _LOADER[0])
    return fresh


def _check_flag(region: str | None) -> None:
    """A --region flag is checked like FINETUNE_REGION (finetune.settings.names)."""
    if region:
        check_region(region, "--region")


def partition_of(region: str) -> str:
    """'aws', 'aws-cn' or 'aws-us-gov': the ARN partition of a region."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def parse_arn(arn: str) -> dict[str, str]:
    """'arn:aws:sagemaker:eu-west-1:123:training-job/NAME' -> its named parts."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return {}
    keys = ("arn", "partition", "service", "region", "account", "resource")
    return dict(zip(keys, parts, strict=True))
