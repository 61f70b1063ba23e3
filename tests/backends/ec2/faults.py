"""A WSGI layer in front of moto: records every AWS request we send, and injects faults.

moto echoes back what it chooses to keep, so the tests assert on the request as sent (the
form-encoded EC2 query parameters). A fault answers a matching request with an AWS error
instead of (``before``) or after (``after``: moto did the work, the reply is lost) moto;
S3's REST requests are matched by their operation's name (PutObject, HeadObject, ...).
It also answers Service Quotas' GetServiceQuota for EC2 quota codes, which moto lacks (it
knows VPC quotas only): ``quotas`` maps a quota code to the value the account has.
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass
from urllib.parse import parse_qsl

from werkzeug.serving import make_server

_ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
    "<Message>{message}</Message></Error></Errors><RequestID>fault</RequestID></Response>"
)


@dataclass
class Fault:
    action: str
    code: str
    message: str = "injected by the test"
    status: int = 500
    times: int = 1
    when: object = None  # callable(params) -> bool, or None for every matching action
    after: bool = False  # let moto process the request, then lose its reply
    on_match: object = None  # callable(params), run once moto did the work (with ``after``)


class FaultLayer:
    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[dict] = []
        self.http: list[tuple[str, str, str, str]] = []  # method, path, query, authorization
        self.faults: list[Fault] = []
        self.quotas: dict[str, float] = {}  # EC2 quota code -> vCPUs (unset: moto's error)
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def sent(self, action: str) -> list[dict]:
        """The parameters of every request with this Action, in order."""
        return [r for r in self.requests if r.get("Action") == action]

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        params = {}
        if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
            params = dict(parse_qsl(body.decode(), keep_blank_values=True))
        if environ.get("HTTP_X_AMZ_TARGET"):  # JSON protocols (SSM): the action is a header
            params["Target"] = environ["HTTP_X_AMZ_TARGET"]
        elif "/s3/aws4_request" in environ.get("HTTP_AUTHORIZATION", ""):  # REST: by method
            params["S3Action"] = _s3_action(environ)
        self.requests.append(params)
        self.http.append(
            (
                environ["REQUEST_METHOD"],
                environ.get("PATH_INFO", "/"),
                environ.get("QUERY_STRING", ""),
                environ.get("HTTP_AUTHORIZATION", ""),
            )
        )
        if params.get("Target") == "ServiceQuotasV20190624.GetServiceQuota":
            wanted = json.loads(body or b"{}")
            if wanted.get("QuotaCode") in self.quotas:
                return self._quota(wanted, start_response)
        fault = self._match(params)
        if fault is None:
            return self.app(environ, start_response)
        if fault.after:
            list(self.app(environ, lambda *a, **k: lambda data: None))  # reply lost
        if fault.on_match is not None:
            fault.on_match(params)  # e.g. kill the caller before it hears back
        data = _ERROR_XML.format(code=fault.code, message=fault.message).encode()
        if "S3Action" in params:  # S3's error document (none at all for a HEAD)
            data = f"<Error><Code>{fault.code}</Code><Message>{fault.message}</Message></Error>"
            data = b"" if environ["REQUEST_METHOD"] == "HEAD" else data.encode()
        start_response(f"{fault.status} Fault", [("Content-Type", "text/xml")])
        return [data]

    def _quota(self, wanted: dict, start_response):
        code = wanted["QuotaCode"]
        quota = {
            "ServiceCode": wanted["ServiceCode"],
            "QuotaCode": code,
            "QuotaName": f"quota {code}",
            "Value": self.quotas[code],
            "Unit": "None",
            "Adjustable": True,
        }
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1")])
        return [json.dumps({"Quota": quota}).encode()]

    def _match(self, params: dict) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                action = params.get("Action") or params.get("S3Action")
                wanted = fault.times > 0 and action == fault.action
                if wanted and (fault.when is None or fault.when(params)):
                    fault.times -= 1
                    return fault
        return None


def _s3_action(environ) -> str:
    """The S3 operation of a path-style request, as far as the launch's uploads need it."""
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/")
    query = environ.get("QUERY_STRING", "")
    has_key = len(path.lstrip("/").split("/", 1)) == 2
    if method == "PUT" and not has_key:
        return "CreateBucket"
    if method == "PUT":
        return "UploadPart" if "partNumber=" in query else "PutObject"
    if method == "POST":
        return "CreateMultipartUpload" if "uploads" in query else "CompleteMultipartUpload"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if method == "DELETE":
        return "DeleteObject"
    return "GetObject" if has_key else "ListObjectsV2"


class FaultServer:
    """moto's WSGI app behind a FaultLayer, on 127.0.0.1 (shares moto's in-process state)."""

    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        self.layer = FaultLayer(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            "127.0.0.1", 0, self.layer, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
