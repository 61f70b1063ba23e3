"""The SageMaker Python SDK v3 (``sagemaker-core``), loaded on first use and configured first.

Why only sagemaker-core: the ``sagemaker`` meta-package drags in mlflow, pyarrow and friends
(docs/decisions/043-aws-sdk-start-up.md) and its resolver lifts numpy past what MXNet needs;
sagemaker-core alone gives the typed ``TrainingJob`` resource (create / get / stop with
client-side pydantic validation).

Before the import we (1) opt out of the SDK's telemetry through the config file named by
SAGEMAKER_USER_CONFIG_OVERRIDE, unless the user already points it somewhere, and (2) make
its clients try once (AWS_MAX_ATTEMPTS=1) unless the user chose retries themselves: our own
bounded retries (finetune.aws.retries) would otherwise multiply with botocore's ten.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from finetune import settings
from finetune.errors import require_module

_CONFIG = """\
SchemaVersion: '1.0'
SageMaker:
  PythonSDK:
    Modules:
      TelemetryOptOut: true
"""


def _prepare_environment() -> None:
    if not os.environ.get("SAGEMAKER_USER_CONFIG_OVERRIDE"):
        path = Path(settings.get().cache_dir) / "sagemaker-config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != _CONFIG:
            path.write_text(_CONFIG)
        os.environ["SAGEMAKER_USER_CONFIG_OVERRIDE"] = str(path)
    if not (os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE")):
        os.environ["AWS_MAX_ATTEMPTS"] = "1"


@lru_cache(maxsize=1)
def training_job_class() -> Any:
    """``sagemaker.core.resources.TrainingJob``, imported on first use (seconds of CPU:
    docs/decisions/043-aws-sdk-start-up.md)."""
    _prepare_environment()
    return require_module("sagemaker.core.resources", extra="aws").TrainingJob


def request_to_kwargs(request: dict) -> dict:
    """A CreateTrainingJob request (API field names) as ``TrainingJob.create`` keyword
    arguments. The SDK's converter silently drops names it does not know, so a request that
    loses a field on the way is refused here instead of being sent without it."""
    training_job_class()
    from sagemaker.core.utils.code_injection.codec import transform

    kwargs = transform(request, "CreateTrainingJobRequest")
    lost = _leaf_count(request) - _leaf_count(kwargs)
    if lost:
        raise ValueError(f"{lost} field(s) of the CreateTrainingJob request are unknown to the SDK")
    return kwargs


def to_plain(resource: Any) -> dict:
    """An SDK resource as a plain dict with the API's field names (Unassigned left out)."""
    from sagemaker.core.utils.utils import serialize

    return serialize(resource)


def _leaf_count(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_leaf_count(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_leaf_count(v) for v in value)
    return 0 if value is None else 1
