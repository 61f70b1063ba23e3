"""What a SageMaker job leaves behind: its metrics (the trainer's log lines while it runs,
metrics.jsonl in output.tar.gz once it ended) and its model.tar.gz."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.aws.s3upload import as_prefix, parse_s3_uri
from finetune.backends import modelfiles
from finetune.contracts import metrics as mt
from finetune.errors import DataError


def metrics_from_log(text: str) -> list[mt.EpochMetrics]:
    """Epoch events from the trainer's 'finetune-metrics k=v ...' lines (last one per epoch)."""
    events: dict[int, mt.EpochMetrics] = {}
    for line in text.splitlines():
        _, marker, rest = line.partition(mt.LOG_PREFIX + " ")
        if not marker:
            continue
        fields = dict(p.split("=", 1) for p in rest.split() if "=" in p)
        try:
            event = mt.EpochMetrics.model_validate(fields)
        except ValueError:
            continue  # a torn or foreign line
        events[event.epoch] = event
    return [events[k] for k in sorted(events)]


def read_output_metrics(s3, job: dict) -> str | None:
    """The text of metrics.jsonl inside output.tar.gz (None when there is none)."""
    bucket, root = parse_s3_uri(job["OutputDataConfig"]["S3OutputPath"])
    key = f"{as_prefix(root)}{job['TrainingJobName']}/output/output.tar.gz"
    with aws_errors("GetObject", resource=f"s3://{bucket}/{key}"):
        try:
            body = retries.call(s3.get_object, Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:
            if retries.error_code(exc) in ("NoSuchKey", "404"):
                return None  # the job ended before writing any output
            raise
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member) if member.isfile() else None  # None: not a file
            if Path(member.name).name == mt.METRICS_FILE and data is not None:
                return data.read().decode("utf-8", "replace")
    return None


def download_model(s3, uri: str, folder: Path) -> None:
    """model.tar.gz at ``uri`` unpacked into ``folder`` (the archive kept beside it)."""
    bucket, key = parse_s3_uri(uri)
    archive = folder.with_name(folder.name + ".tar.gz")
    try:
        with aws_errors("GetObject", resource=uri):
            try:
                retries.call(s3.download_file, Bucket=bucket, Key=key, Filename=str(archive))
            except Exception as exc:
                if retries.error_code(exc) in ("NoSuchKey", "404"):
                    raise DataError(
                        f"the job's model {uri} is not in S3 (deleted, or never written)",
                        "pass a model folder instead of the run id if you kept a copy; "
                        "otherwise train again.",
                    ) from None
                raise
        modelfiles.extract(archive, folder, uri)
    finally:
        archive.unlink(missing_ok=True)
