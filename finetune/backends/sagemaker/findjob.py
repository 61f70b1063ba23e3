"""Which SageMaker job is a run's: the ARN its ledger row holds, or a newer job its launch
recorded by name before CreateTrainingJob (RUN_DIR/sagemaker/NAME-request.json, with the
region in options.json). A launch killed after SageMaker made the job never saved its ARN;
job names are the run's own (request.job_name), so the job is found again by that name.
"""

from __future__ import annotations

import json
from pathlib import Path

from finetune.aws import retries
from finetune.aws.session import parse_arn
from finetune.backends.sagemaker import request as rq

RECORD_DIR = "sagemaker"  # in the run dir: options.json, one request per job, metrics
_REQUEST = "-request.json"


def from_arn(arn: str | None) -> tuple[str, str] | None:
    """(job name, region) of a training job's ARN; None for anything else."""
    parts = parse_arn(arn or "")
    if not parts or "/" not in parts.get("resource", ""):
        return None
    return parts["resource"].split("/", 1)[1], parts["region"]


def attempt(name: str) -> int:
    """0 for a run's first job, n for its resumed job NAME-rn."""
    head, _, tail = name.rpartition("-r")
    return int(tail) if head and tail.isdigit() else 0


def recorded(run) -> tuple[list[str], str]:
    """(the run's job names its launches recorded, newest first; their region, "" unknown)."""
    folder = Path(run.run_dir or ".") / RECORD_DIR
    if not run.run_dir or not folder.is_dir():
        return [], ""
    prefix = rq.job_name(run.id)
    names = [p.name[: -len(_REQUEST)] for p in folder.glob(f"*{_REQUEST}")]
    names = [n for n in names if n == prefix or n.startswith(prefix + "-r")]
    try:
        region = json.loads((folder / "options.json").read_text()).get("region") or ""
    except (OSError, ValueError, AttributeError):
        region = ""
    return sorted(names, key=attempt, reverse=True), region


def newer(run) -> tuple[list[str], str]:
    """The recorded names newer than the ledger's job (the candidates to look up by name)."""
    names, region = recorded(run)
    ref = from_arn(run.backend_ref)
    if ref is not None:
        names = [n for n in names if attempt(n) > attempt(ref[0])]
        region = ref[1]  # a resumed job runs where its first one did (the stored options)
    return names, region


def missing(exc: BaseException) -> bool:
    """Whether DescribeTrainingJob said there is no such job (SageMaker: a
    ValidationException 'Requested resource not found'; moto: 'Could not find ...')."""
    code = retries.error_code(exc)
    text = str(exc).lower()
    if code in ("ResourceNotFound", "ResourceNotFoundException"):
        return True
    return code == "ValidationException" and ("not found" in text or "could not find" in text)


def run_of(name: str) -> str:
    """The run id of one of its job names ('finetune-20261122-101500-a3f9-r1' ->
    'ft-20261122-101500-a3f9'); "" for a name that is not a finetune job's."""
    if not name.startswith(rq.JOB_PREFIX):
        return ""
    base = name[len(rq.JOB_PREFIX) :]
    if attempt(name):
        base = base.rpartition("-r")[0]
    return "ft-" + base
