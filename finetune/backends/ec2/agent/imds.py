"""A small IMDSv2 client: session token first, then every request carries it.

The instance is launched with HttpTokens=required, so a request without a token gets 401.
A token lives ``ttl`` seconds; a 401 later on (expired or revoked token) fetches a new one
and retries once. EC2 publishes a spot interruption two minutes ahead at
``meta-data/spot/instance-action`` (404 until then), best effort.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

DEFAULT_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
SPOT_ACTION = "meta-data/spot/instance-action"


class ImdsUnavailable(Exception):
    """The metadata service did not answer (not on EC2, or a network problem)."""


class Imds:
    """IMDSv2 at ``base_url`` (the link-local address on EC2; a fake in tests)."""

    def __init__(self, base_url: str = DEFAULT_URL, timeout: float = 2.0, ttl: int = 21600):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.ttl = ttl
        self._token: str | None = None
        self._expires = 0.0

    def token(self) -> str:
        """A valid session token, renewed a minute before it expires."""
        if self._token is None or time.time() > self._expires - 60:
            req = urllib.request.Request(
                self.base_url + TOKEN_PATH, method="PUT", headers={TTL_HEADER: str(self.ttl)}
            )
            try:
                self._token = self._open(req).decode()
            except urllib.error.HTTPError as exc:
                raise ImdsUnavailable(f"IMDS refused a session token ({exc.code})") from None
            self._expires = time.time() + self.ttl
        return self._token

    def get(self, path: str) -> str | None:
        """The text at latest/``path``, or None when it does not exist (404)."""
        for attempt in (1, 2):
            req = urllib.request.Request(
                f"{self.base_url}/latest/{path}", headers={TOKEN_HEADER: self.token()}
            )
            try:
                return self._open(req).decode()
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code == 401 and attempt == 1:
                    self._token = None  # expired or revoked: get a new one, once
                    continue
                raise ImdsUnavailable(f"IMDS answered {exc.code} for {path}") from None
        return None

    def spot_action(self) -> dict | None:
        """The pending spot interruption ({"action": "terminate", "time": ...}) or None."""
        text = self.get(SPOT_ACTION)
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return {"action": text.strip()}

    def instance_id(self) -> str | None:
        return self.get("meta-data/instance-id")

    def _open(self, req: urllib.request.Request) -> bytes:
        try:
            # bandit B310 (url schemes): the address is the agent's own IMDS setting (http://169.254.169.254
            # on EC2, a local fake in tests), never user input from a request
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # nosec B310
                return resp.read()
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError) as exc:
            raise ImdsUnavailable(f"IMDS at {self.base_url} did not answer ({exc})") from None
