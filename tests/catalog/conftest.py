"""Fixtures for catalog tests: the fake Pricing API + ECB server, AWS env, offline URLs."""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from pricing_fakes import Handler

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fake_aws():
    """A running fake: ``.url``, ``.pages[service] = [[product, ...], ...]``, ``.requests``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.pages, server.requests = {}, []
    server.ecb = (FIXTURES / "ecb-hist.xml").read_bytes()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_url():
    """An http URL on 127.0.0.1 where nothing listens: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """Fake credentials, one attempt per call, no shared config, no instance metadata."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return monkeypatch


@pytest.fixture
def online(aws_env, fake_aws):
    """Point the Pricing API and the ECB feed at the local fake."""
    aws_env.setenv("AWS_ENDPOINT_URL_PRICING", fake_aws.url)
    aws_env.setenv("FINETUNE_ECB_URL", f"{fake_aws.url}/ecb/eurofxref-hist-90d.xml")
    return fake_aws


@pytest.fixture
def offline(aws_env, closed_url):
    """Point the Pricing API and the ECB feed at a closed port."""
    aws_env.setenv("AWS_ENDPOINT_URL_PRICING", closed_url)
    aws_env.setenv("FINETUNE_ECB_URL", f"{closed_url}/ecb.xml")
    return closed_url
