"""A WSGI layer in front of moto's app, serving on its own port in this process.

It records every request as it came over the wire (service, action, parsed body), answers
with injected AWS errors where a test asks for them (quota, capacity, throttling, SlowDown,
expired credentials ...), implements the StopTrainingJob moto lacks, and plays scripted
SageMaker status sequences by editing moto's in-process job objects before a Describe.
"""

from __future__ import annotations

import io
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import parse_qs

ACCOUNT = "123456789012"
_SCOPE = re.compile(r"Credential=([^/]+)/\d{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request")
CONTAINER_KEY = "AKIDCONTAINER"  # tests that play the training container sign with this key


@dataclass
class Call:
    """One request as the server saw it."""

    service: str
    region: str
    action: str
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes
    key_id: str = ""  # the access key that signed it (CONTAINER_KEY: the job's side)

    @property
    def json(self) -> dict:
        return json.loads(self.body or b"{}")

    @property
    def form(self) -> dict:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}


@dataclass
class Fault:
    action: str
    code: str
    message: str
    status: int
    times: int  # how many matching requests get it (-1: all)
    forward: bool = False  # let moto do the work, then answer with the error (a lost reply)
    on_match: object = None  # callable(Call), run before the answer (e.g. kill the caller)


@dataclass
class Gateway:
    app: object
    calls: list[Call] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    scripts: dict[str, list[dict]] = field(default_factory=dict)
    played: set = field(default_factory=set)  # jobs whose script has started
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.faults.clear()
            self.scripts.clear()
            self.played.clear()

    # -- what tests use -------------------------------------------------------------------
    def fail(
        self, action, code, message="", status=400, times=1, forward=False, on_match=None
    ) -> None:
        """The next ``times`` requests for ``action`` get this AWS error (-1: every one);
        with ``forward`` moto still performs them (the request landed, the reply was lost);
        ``on_match(call)`` runs before the answer goes back."""
        fault = Fault(action, code, message or code, status, times, forward, on_match)
        with self.lock:
            self.faults.append(fault)

    def script(self, steps: list[dict], job: str = "*") -> None:
        """Each DescribeTrainingJob of ``job`` (any job: '*') first applies the next step."""
        with self.lock:
            self.scripts[job] = list(steps)

    def actions(self, service: str | None = None) -> list[str]:
        return [c.action for c in self.ours() if service in (None, c.service)]

    def ours(self) -> list[Call]:
        """What finetune sent (not what a test sent playing the training container)."""
        return [c for c in self.calls if c.key_id != CONTAINER_KEY]

    def requests(self, action: str) -> list[Call]:
        return [c for c in self.ours() if c.action == action]

    # -- WSGI -----------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        body = _read_body(environ)
        call = _describe_call(environ, body)
        with self.lock:
            self.calls.append(call)
            fault = self._take_fault(call.action)
        if fault is not None:
            if fault.forward:
                b"".join(self.app(environ, lambda *a, **k: None))
            if fault.on_match is not None:
                fault.on_match(call)
            return _error(call, fault, start_response)
        if call.action == "StopTrainingJob":
            return self._stop(call, start_response)
        if call.action == "DescribeTrainingJob":
            self._advance(call.json.get("TrainingJobName", ""), call.region)
        return self.app(environ, start_response)

    def _take_fault(self, action: str) -> Fault | None:
        for fault in self.faults:
            if fault.action == action and fault.times != 0:
                fault.times -= 1 if fault.times > 0 else 0
                return fault
        return None

    def _advance(self, name: str, region: str) -> None:
        key = name if name in self.scripts else "*" if "*" in self.scripts else None
        job = moto_job(name, region)
        if key is None or job is None:
            return
        with self.lock:
            steps = self.scripts[key]
            step = steps.pop(0) if steps else None
            if key == "*":  # the first job described owns the wildcard script
                self.scripts[name] = self.scripts.pop("*")
            first = name not in self.played
            self.played.add(name)
        if step:
            apply_step(job, step, first)

    def _stop(self, call: Call, start_response):
        job = moto_job(call.json.get("TrainingJobName", ""), call.region)
        if job is None or job.training_job_status != "InProgress":
            fault = Fault("StopTrainingJob", "ValidationException", "job not in progress", 400, 1)
            return _error(call, fault, start_response)
        apply_step(job, {"TrainingJobStatus": "Stopping", "SecondaryStatus": "Stopping"})
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1")])
        return [b"{}"]


def moto_job(name: str, region: str):
    """moto's in-process object for a training job (None when there is none)."""
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT][region].training_jobs.get(name)


def apply_step(job, step: dict, first: bool = False) -> None:
    """Set API fields on moto's job; a SecondaryStatus also appends a transition. 'At' (s
    after creation) dates the transition; snake_case names are set as they are."""
    at = job.creation_time + timedelta(seconds=step.get("At", 0))
    if first:  # forget moto's instant completion
        job.secondary_status_transitions, job.final_metric_data_list = [], []
        job.training_end_time = None
    if "TrainingJobStatus" in step:
        job.training_job_status = step["TrainingJobStatus"]
    if "SecondaryStatus" in step:
        transitions = [t for t in job.secondary_status_transitions if t["Status"] != "Completed"]
        if transitions and job.secondary_status != "Completed":
            transitions[-1]["EndTime"] = at
        message = step.get("StatusMessage", step["SecondaryStatus"])
        transitions.append(
            {"Status": step["SecondaryStatus"], "StartTime": at, "StatusMessage": message}
        )
        job.secondary_status = step["SecondaryStatus"]
        job.secondary_status_transitions = transitions
    for key, value in step.items():
        if key not in ("At", "TrainingJobStatus", "SecondaryStatus", "StatusMessage"):
            setattr(job, _snake(key), value)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _read_body(environ) -> bytes:
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    if length:
        body = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):  # chunked: werkzeug de-chunks until the end
        body = stream.read()
    else:
        body = b""  # no body; reading would wait for the client to close
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("wsgi.input_terminated", None)
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return body


def _describe_call(environ, body: bytes) -> Call:
    headers = {
        k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")
    }
    m = _SCOPE.search(headers.get("authorization", ""))
    key_id, region, service = (m.group(1), m.group(2), m.group(3)) if m else ("", "", "")
    query = {
        k: v[0]
        for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()
    }
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/")
    target = headers.get("x-amz-target", "")
    if target:
        action = target.rsplit(".", 1)[-1]
    elif service == "s3":
        action = _s3_action(method, path, query)
    else:
        action = parse_qs(body.decode("utf-8", "replace")).get("Action", [""])[0]
    return Call(service, region, action, method, path, query, headers, body, key_id)


def _s3_action(method: str, path: str, q: dict) -> str:
    has_key = len(path.lstrip("/").split("/", 1)) == 2
    if method == "PUT":
        return "UploadPart" if "partNumber" in q else "PutObject" if has_key else "CreateBucket"
    if method == "POST":
        return "CreateMultipartUpload" if "uploads" in q else "CompleteMultipartUpload"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if has_key:
        return "GetObject"
    return "GetBucketLocation" if "location" in q else "ListObjectsV2"


def _error(call: Call, fault: Fault, start_response):
    status = f"{fault.status} Error"
    if call.headers.get("x-amz-target"):
        body = json.dumps({"__type": fault.code, "message": fault.message}).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", fault.code)]
    elif call.service == "s3":
        body = f"<Error><Code>{fault.code}</Code><Message>{fault.message}</Message></Error>"
        body = b"" if call.method == "HEAD" else body.encode()
        headers = [("Content-Type", "application/xml")]
    else:
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{fault.code}</Code>"
            f"<Message>{fault.message}</Message></Error><RequestId>1</RequestId></ErrorResponse>"
        ).encode()
        headers = [("Content-Type", "text/xml")]
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [body]
