"""A training job's CloudWatch log, read incrementally.

SageMaker writes one stream per host to /aws/sagemaker/TrainingJobs, named JOB/algo-N-EPOCH.
A ``JobLog`` keeps, per stream, the forward token of what it has read, and the text so far;
``text(offset)`` returns what came after ``offset`` characters (the Backend.logs contract).
With several hosts each line is prefixed with its host, e.g. "[algo-2] ...".

Only the job's own streams are read: JOB/algo-N-DIGITS with N up to the job's host count. A
stream of another name under JOB/ (algo-9 of a two-host job, anything else) is skipped: it
was not written by the job's hosts, and its lines would otherwise count as the job's metrics.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.session import LOG_GROUP

log_ = logging.getLogger(__name__)


@dataclass
class JobLog:
    """Everything read so far from one job's log streams."""

    job_name: str
    hosts: int = 1  # the job's instance count: streams of algo-1 .. algo-HOSTS are its own
    tokens: dict[str, str | None] = field(default_factory=dict)
    chunks: list[str] = field(default_factory=list)

    def text(self, offset: int = 0) -> tuple[str, int]:
        whole = "".join(self.chunks)
        return whole[offset:], len(whole)


def refresh(logs_client, log: JobLog, max_pages: int = 50) -> str:
    """Fetch new events of every stream of the job; returns the new text (maybe '')."""
    streams = [s for s in _streams(logs_client, log.job_name) if _own(log, s)]
    many = len(streams) > 1
    new: list[str] = []
    for stream in streams:
        host = stream[len(log.job_name) + 1 :].rsplit("-", 1)[0]
        for message in _events(logs_client, log, stream, max_pages):
            line = message if message.endswith("\n") else message + "\n"
            new.append(f"[{host}] {line}" if many else line)
    text = "".join(new)
    if text:
        log.chunks.append(text)
    return text


def _own(log: JobLog, stream: str) -> bool:
    m = re.fullmatch(re.escape(log.job_name) + r"/algo-(\d+)-\d+", stream)
    if m and 1 <= int(m[1]) <= log.hosts:
        return True
    if stream not in log.tokens:  # said once per stream, not at every poll
        log_.warning("skipping log stream %r: not one of job %s's hosts", stream, log.job_name)
        log.tokens[stream] = None
    return False


def _streams(logs_client, job_name: str) -> list[str]:
    names: list[str] = []
    kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{job_name}/"}
    with aws_errors("DescribeLogStreams", resource=LOG_GROUP):
        while True:
            try:
                page = retries.call(logs_client.describe_log_streams, **kwargs)
            except Exception as exc:
                if retries.error_code(exc) == "ResourceNotFoundException":
                    return []  # no job has logged in this region yet
                raise
            names += [s["logStreamName"] for s in page.get("logStreams", [])]
            if not page.get("nextToken"):
                return sorted(names)
            kwargs["nextToken"] = page["nextToken"]


def _events(logs_client, log: JobLog, stream: str, max_pages: int) -> list[str]:
    out: list[str] = []
    for _ in range(max_pages):
        kwargs: dict[str, Any] = {
            "logGroupName": LOG_GROUP,
            "logStreamName": stream,
            "startFromHead": True,
        }
        token = log.tokens.get(stream)
        if token:
            kwargs["nextToken"] = token
        with aws_errors("GetLogEvents", resource=f"{LOG_GROUP}/{stream}"):
            page = retries.call(logs_client.get_log_events, **kwargs)
        out += [e["message"] for e in page.get("events", [])]
        nxt = page.get("nextForwardToken")
        # CloudWatch returns the same token when there is nothing newer: stop there
        if not nxt or nxt == token:
            break
        log.tokens[stream] = nxt
        if not page.get("events"):
            break
    return out
