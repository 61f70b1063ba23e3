"""Training images by digest: a tag is resolved once, at launch, and the run uses the digest.

A tag can move (before the stack made tags immutable, anyone who could push could swap the
code another run executes under its role); a digest names one image. Every backend resolves
``REGISTRY/REPO:TAG`` to ``REGISTRY/REPO@sha256:...`` with ECR's DescribeImages before it
starts anything and records it with the run; every attempt (spot relaunches, resumes) pulls
the digest. Only the caller's own account and region are resolved: AWS's deep-learning images
(AWS's accounts answer no DescribeImages of others) are used as given (pass @sha256:... to pin
one). ``ECR_URI`` is finetune's one pattern of an ECR address: every backend parses an image
with ``parse``, and IAM statements name its repository by ``ImageRef.repository_arn``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from finetune.aws import retries
from finetune.aws.session import partition_of

# ACCOUNT.dkr.ecr.REGION.amazonaws.com[.cn]/REPO, then :TAG or @sha256:DIGEST (parse decides
# whether one of them may be missing)
ECR_URI = re.compile(
    r"^(?P<registry>(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?)"
    r"/(?P<repo>[a-z0-9._/-]+)(?::(?P<tag>[\w.-]+)|@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
_MISSING = ("ImageNotFoundException", "RepositoryNotFoundException")


@dataclass(frozen=True)
class ImageRef:
    registry: str
    account: str
    region: str
    repository: str
    tag: str | None
    digest: str | None

    def by_digest(self, digest: str) -> str:
        return f"{self.registry}/{self.repository}@{digest}"

    @property
    def repository_arn(self) -> str:
        """The repository's ARN, in its region's partition (what an IAM pull statement names)."""
        return (
            f"arn:{partition_of(self.region)}:ecr:{self.region}:{self.account}"
            f":repository/{self.repository}"
        )


class ImageMissing(LookupError):
    """The tag (or the repository) does not exist in ECR."""


def parse(uri: str, *, untagged: bool = False) -> ImageRef | None:
    """An ECR image URI's parts, or None for anything else (another registry, a typo). An
    address with neither tag nor digest is one only with ``untagged`` (``docker pull`` takes
    it as ``:latest``; SageMaker refuses it)."""
    m = ECR_URI.match(uri or "")
    if not m or not (untagged or m["tag"] or m["digest"]):
        return None
    return ImageRef(m["registry"], m["account"], m["region"], m["repo"], m["tag"], m["digest"])


def is_pinned(uri: str) -> bool:
    return "@sha256:" in (uri or "")


def pin(ecr, uri: str, account: str, region: str) -> str:
    """``uri`` by digest when it is a tag in this account's ECR in ``region`` (one
    DescribeImages); anything else unchanged. Raises ImageMissing for an unknown tag."""
    ref = parse(uri)
    if ref is None or ref.digest or ref.account != account or ref.region != region:
        return uri
    try:
        found = retries.call(
            ecr.describe_images,
            registryId=ref.account,
            repositoryName=ref.repository,
            imageIds=[{"imageTag": ref.tag}],
        )["imageDetails"]
    except Exception as exc:
        if retries.error_code(exc) in _MISSING:
            raise ImageMissing(uri) from None
        raise
    if not found:
        raise ImageMissing(uri)
    return ref.by_digest(found[0]["imageDigest"])
