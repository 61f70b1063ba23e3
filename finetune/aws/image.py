"""The training image: build it from our Dockerfile and push it to ECR with the Docker CLI.

ECR login uses GetAuthorizationToken (user "AWS", a 12-hour password) fed to `docker login
--password-stdin`, so the password never appears in a process list. Where no Docker engine
answers (`docker info` fails), the error says to push elsewhere or pass --image. A Dockerfile
that takes a BASE_DIGEST build argument (ours) is built only with its base pinned by digest:
--base-digest, else the Dockerfile's own default; neither, and nothing is built.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.errors import CloudError, DataError, DependencyError, UsageError

BUILD_TIMEOUT_S = 3600
DIGEST = re.compile(r"@?(sha256:[0-9a-f]{64})")
_DECLARED = re.compile(r"^ARG BASE_DIGEST=(\S*)", re.MULTILINE)
_FIND_DIGEST = (
    "look it up where a registry answers: `docker buildx imagetools inspect TAG` (the BASE "
    "tag the Dockerfile names; its 'Digest:' line), then pass --base-digest sha256:<64 hex> "
    "or record it as the Dockerfile's BASE_DIGEST default."
)
IMAGE_REPOSITORY = "finetune"  # the ECR repository the infra stack creates
_NO_DOCKER_FIX = (
    "run `finetune image push` on a machine with a running Docker engine (same AWS account "
    "and region), or build and push the image yourself and pass --image URI to `launch`."
)


def docker_engine() -> None:
    """Raise a DependencyError unless a Docker client and a reachable engine are here."""
    if not shutil.which("docker"):
        raise DependencyError("The docker command is not installed here.", _NO_DOCKER_FIX)
    try:
        out = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DependencyError(f"`docker info` did not answer ({exc}).", _NO_DOCKER_FIX) from None
    if out.returncode != 0:
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DependencyError(f"No Docker engine answers here: {reason[0]}", _NO_DOCKER_FIX)


def default_image(account: str, region: str, tag: str) -> str:
    """Where `finetune image push` puts the training image (our Dockerfile's)."""
    return image_uri(account, region, IMAGE_REPOSITORY, tag)


def image_uri(account: str, region: str, repository: str, tag: str) -> str:
    """The ECR URI of ``repository:tag`` in ``account`` and ``region`` (China: .com.cn)."""
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{account}.dkr.ecr.{region}{suffix}/{repository}:{tag}"


def base_digest(dockerfile_text: str, given: str | None) -> str | None:
    """The ``@sha256:...`` the base image is built from: ``given`` (--base-digest), else the
    Dockerfile's own ``ARG BASE_DIGEST=`` default; None for a Dockerfile without that
    argument (nothing of ours to pin). A Dockerfile that takes it gets one, or a UsageError."""
    declared = _DECLARED.search(dockerfile_text)
    if declared is None:
        if given:
            raise UsageError(
                "--base-digest was given, but this Dockerfile has no BASE_DIGEST argument",
                "use it with finetune's Dockerfile, or pin the base in your own FROM line.",
            )
        return None
    value = (given or declared[1]).strip()
    if not value:
        raise UsageError(
            "the training image's base is not pinned: the Dockerfile's BASE_DIGEST is empty "
            "and no --base-digest was given, so the build would take whatever its tag names "
            "today",
            _FIND_DIGEST,
        )
    found = DIGEST.fullmatch(value)
    if found is None:
        raise UsageError(f"base digest {value!r} is not sha256:<64 lowercase hex>", _FIND_DIGEST)
    return f"@{found[1]}"


def push(
    aws,
    context: Path,
    repository: str,
    tag: str,
    dockerfile: str = "Dockerfile",
    digest: str | None = None,
) -> str:
    """Build ``context`` with ``dockerfile`` (its base pinned by ``digest`` or its own
    default: base_digest), log in to ECR, push; returns the image URI."""
    docker_file = Path(context) / dockerfile
    if not docker_file.is_file():
        raise DataError(
            f"there is no {dockerfile} in {context}",
            "run from the repository root, or pass --context DIR (and --dockerfile NAME).",
        )
    pinned = base_digest(docker_file.read_text(encoding="utf-8"), digest)
    docker_engine()
    uri = image_uri(aws.account_id, aws.region, repository, tag)
    endpoint, password = _login_token(aws)
    pin = ["--build-arg", f"BASE_DIGEST={pinned}"] if pinned else []
    _docker(["build", "--platform", "linux/amd64", *pin, "-t", uri, "-f", str(docker_file),
             str(context)])  # fmt: skip
    _docker(["login", "--username", "AWS", "--password-stdin", endpoint], stdin=password)
    _docker(["push", uri])
    return uri


def _login_token(aws) -> tuple[str, str]:
    with aws_errors("GetAuthorizationToken", resource="ECR", region=aws.region):
        data = retries.call(aws.client("ecr").get_authorization_token)["authorizationData"][0]
    _user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    return data["proxyEndpoint"], password


def _docker(args: list[str], stdin: str | None = None) -> None:
    """Run one docker command, its output visible; a failure says which step failed."""
    try:
        done = subprocess.run(["docker", *args], input=stdin, text=True, timeout=BUILD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CloudError(f"`docker {args[0]}` did not finish ({exc}).", _NO_DOCKER_FIX) from None
    if done.returncode != 0:
        raise CloudError(
            f"`docker {args[0]}` failed with exit code {done.returncode} (its output is above).",
            "fix what it reports; for `push`, check that the ECR repository exists "
            "(`finetune infra deploy` creates it) and that you may push to it. Its tags are "
            "immutable: a tag that already exists is never overwritten, push under a new "
            "--tag.",
        )
