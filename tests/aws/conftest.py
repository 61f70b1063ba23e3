"""AWS as moto's HTTP app behind our gateway (tests/aws/gateway.py), plus a deployed-looking
account: a bucket, the ECR image `finetune image push` would have pushed, settings."""

from __future__ import annotations

import pytest

from .gateway import ACCOUNT, Gateway

REGION = "eu-west-1"
BUCKET = "finetune-test-bucket"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/finetune-sagemaker"


@pytest.fixture(scope="session")
def gateway_server(moto_server):
    """A second endpoint in this process: the gateway wrapping moto's WSGI app (the same
    in-process backends the session's moto server uses)."""
    import threading

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    gateway = Gateway(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, gateway, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield gateway, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture
def gw(aws, gateway_server, monkeypatch):
    """The gateway, reset; every client in the test goes through it. Retries do not wait
    (their delays are recorded in ``gw.delays``)."""
    from finetune.aws import retries

    gateway, url = gateway_server
    gateway.reset()
    gateway.delays = []
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setattr(retries, "sleep", gateway.delays.append)
    _forget_sdk_clients()
    return gateway


def _forget_sdk_clients() -> None:
    """sagemaker-core caches clients by session id; a recycled id must not get a stale one."""
    import sys

    if "sagemaker.core.utils.utils" in sys.modules:
        sys.modules["sagemaker.core.utils.utils"].SageMakerClient.reset()


@pytest.fixture
def cloud(gw, monkeypatch):
    """Settings as after `finetune infra deploy` and `finetune image push` in eu-west-1."""
    import boto3

    from finetune import __version__, settings

    monkeypatch.setenv("FINETUNE_REGION", REGION)
    monkeypatch.setenv("FINETUNE_BUCKET", BUCKET)
    monkeypatch.setenv("FINETUNE_ROLE_ARN", ROLE)
    settings.get.cache_clear()
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    ecr = boto3.client("ecr", region_name=REGION)
    ecr.create_repository(repositoryName="finetune")
    manifest = (
        '{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"}'
    )
    ecr.put_image(repositoryName="finetune", imageManifest=manifest, imageTag=__version__)
    gw.reset()  # the set-up calls above are not what the tests assert on
    return gw


@pytest.fixture(autouse=True)
def _close_ledgers():
    """Ledgers the helpers opened are closed after each test (no SQLite lock outlives it)."""
    from .helpers import OPEN_LEDGERS

    yield
    while OPEN_LEDGERS:
        OPEN_LEDGERS.pop().close()
