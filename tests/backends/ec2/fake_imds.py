"""A small fake of the EC2 instance-metadata service (IMDSv2), for the agent's tests.

PUT /latest/api/token needs the TTL header and returns a token; every GET needs a valid
token (401 without). spot/instance-action is 404 until a test calls ``schedule_notice``.
iam/security-credentials/ names the instance profile's role and serves its temporary
credentials, as boto3 and the AWS CLI read them on an instance. Every request is recorded, so
a test can prove that each one carried a token.
"""

from __future__ import annotations

import datetime
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CREDENTIALS = "/latest/meta-data/iam/security-credentials/"
ROLE = "finetune-run-role"
ACCESS_KEY = "ASIAFAKEINSTANCEROLE"  # moto accepts any key: the tests tell by this one


class FakeImds:
    MAC = "0e:11:22:33:44:55"

    def __init__(
        self, instance_id: str = "i-0fake0000000000001", vpc_cidrs: str = "172.31.0.0/16"
    ) -> None:
        self.instance_id = instance_id
        self.vpc_cidrs = vpc_cidrs  # moto's default VPC; newline-separated, as IMDS says
        self.tokens: set[str] = set()
        self.notice: dict | None = None
        self.requests: list[dict] = []  # method, path, token (None when absent), status
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeImds:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def schedule_notice(self, action: str = "terminate") -> None:
        self.notice = {"action": action, "time": "2026-11-22T10:00:00Z"}

    def revoke_tokens(self) -> None:
        self.tokens.clear()

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _reply(self, status: int, body: str = "") -> None:
                token = self.headers.get("X-aws-ec2-metadata-token")
                fake.requests.append(
                    dict(method=self.command, path=self.path, token=token, status=status)
                )
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                if self.path != "/latest/api/token" or not ttl:
                    return self._reply(400)
                token = secrets.token_hex(8)
                fake.tokens.add(token)
                return self._reply(200, token)

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") not in fake.tokens:
                    return self._reply(401)
                if self.path == "/latest/meta-data/instance-id":
                    return self._reply(200, fake.instance_id)
                if self.path == "/latest/meta-data/mac":
                    return self._reply(200, fake.MAC)
                cidrs = f"/latest/meta-data/network/interfaces/macs/{fake.MAC}/vpc-ipv4-cidr-blocks"
                if self.path == cidrs:
                    return self._reply(200, fake.vpc_cidrs)
                if self.path == CREDENTIALS:
                    return self._reply(200, ROLE)
                if self.path == CREDENTIALS + ROLE:
                    return self._reply(200, _credentials())
                if self.path == "/latest/meta-data/spot/instance-action":
                    if fake.notice is None:
                        return self._reply(404)
                    return self._reply(200, json.dumps(fake.notice))
                return self._reply(404)

        return Handler


def _credentials() -> str:
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=6)
    return json.dumps(
        {
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": ACCESS_KEY,
            "SecretAccessKey": "fake-secret",
            "Token": "fake-session-token",
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
