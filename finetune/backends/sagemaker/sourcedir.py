"""Our package as the source directory of a job on AWS's PyTorch training image.

The tar.gz holds the finetune package, requirements.txt and finetune_entry.py
(finetune/train/sagemaker_entry.py); no setup.py, with which the toolkit would treat the
directory as a package that torchrun cannot run. It goes to s3://BUCKET/finetune/code/RUN/,
named by its content. The job does not take it on trust (it lies where other SageMaker
callers may write): its ContainerEntrypoint is codecheck.py, carried in the request with the
tar.gz's sha256, which checks and unpacks it before the toolkit starts (``entrypoint``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.backends import shipping

CODE_ROOT = "finetune/code/"  # the run's own role may read its prefix (runrole.py)
PROGRAM = "finetune_entry.py"
LOG_LEVEL_INFO = 20
# what the trainer imports beyond the image's torch and numpy (the rest is launch-side only)
JOB_NEEDS = ("pydantic", "pillow")
ENTRY_ITEM = 256  # CreateTrainingJob: at most 100 ContainerEntrypoint items of 256 characters
_STUB = "import sys;exec(''.join(sys.argv[1:{n}]))"  # python -c: the items after it are code


@dataclass(frozen=True)
class SourceDir:
    """The job's source directory: its bytes and where it goes in S3."""

    data: bytes
    bucket: str
    key: str
    lock: str = ""  # the hashed list codecheck.py installs first (the recipe names loggers)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def hyperparameters(self, region: str, hosts: int) -> dict[str, str]:
        """The toolkit's sagemaker_* hyperparameters for this source directory, as AWS's
        training toolkit in the image reads them (sagemaker_training's params.py; values
        JSON-encoded, as the SageMaker Python SDK sends them)::

            sagemaker_program                   the script to run, relative to the directory
            sagemaker_submit_directory          s3:// URI of a tar.gz it unpacks into
                                                /opt/ml/code, then `pip install -r
                                                requirements.txt` there when present
            sagemaker_region                    the region it downloads that tar.gz from
            sagemaker_container_log_level       the toolkit's own log level (20: INFO)
            sagemaker_torch_distributed_enabled several instances: the program under torchrun
                                                on every host (one process per GPU, node rank
                                                by host order)
        """
        values: dict[str, object] = {
            "sagemaker_program": PROGRAM,
            "sagemaker_submit_directory": self.uri,
            "sagemaker_region": region,
            "sagemaker_container_log_level": LOG_LEVEL_INFO,
        }
        if hosts > 1:  # one host: our entrypoint starts torchrun itself for several GPUs
            values["sagemaker_torch_distributed_enabled"] = True
        return {k: json.dumps(v) for k, v in values.items()}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def entrypoint(self, region: str) -> list[str]:
        """The job's ContainerEntrypoint: codecheck.py's text, in items SageMaker accepts,
        called with this source directory's URI and sha256."""
        source = resources.files(__package__).joinpath("codecheck.py").read_text("utf-8")
        args = [self.uri, self.sha256, region] + ([self.lock] if self.lock else [])
        source += f"\nsys.exit(main({', '.join(map(repr, args))}))\n"
        items = [source[i : i + ENTRY_ITEM] for i in range(0, len(source), ENTRY_ITEM)]
        return ["python3", "-c", _STUB.format(n=len(items) + 1), *items]

    def upload(self, s3) -> None:
        """Put the tar.gz in S3 (after the pre-flight checks: nothing is written before)."""
        with aws_errors("PutObject", resource=self.uri):
            retries.call(
                s3.put_object,
                Bucket=self.bucket,
                Key=self.key,
                Body=self.data,
                ContentType="application/gzip",
            )


def build(bucket: str, run_id: str, loggers: bool = False) -> SourceDir:
    """The source directory of run ``run_id``, named by its sha256 under the run's prefix;
    ``loggers``: the recipe names metric loggers, whose packages the job installs first."""
    requirements = job_requirements()
    entry = resources.files("finetune.train").joinpath("sagemaker_entry.py").read_bytes()
    data = shipping.source_tarball({"requirements.txt": requirements.encode(), PROGRAM: entry})
    key = f"{CODE_ROOT}{run_id}/sourcedir-{shipping.sha256_hex(data)[:16]}.tar.gz"
    return SourceDir(data, bucket, key, shipping.METRICS_LOCK if loggers else "")


def job_requirements() -> str:
    """requirements.txt for the toolkit's ``pip install -r``: no index, only what the trainer
    imports beyond the image's torch (JOB_NEEDS: AWS's PyTorch training images carry them), in
    the ranges our metadata gives. An image without them fails at the install, naming the
    package, instead of resolving open ranges from PyPI. The metric loggers a recipe names
    are codecheck.py's to install (their hashed list, shipping.METRICS_LOCK, inside the
    checked tar.gz), from PyPI, first; they are never required."""
    needed = [r for r in shipping.runtime_requirements() if shipping.name_of(r) in JOB_NEEDS]
    head = [
        "# installed from nothing but the image (no index): finetune's trainer needs these",
        "--no-index",
    ]
    return "\n".join([*head, *needed]) + "\n"
