"""Our package as the source directory of a job on AWS's PyTorch training image.

SageMaker's training toolkit (in that image) reads these hyperparameters (sagemaker_training's
params.py; values JSON-encoded, as the SageMaker Python SDK sends them):

    sagemaker_program                   the script to run, relative to the unpacked directory
    sagemaker_submit_directory          s3:// URI of a tar.gz it unpacks into /opt/ml/code, then
                                        `pip install -r requirements.txt` there when present
    sagemaker_region                    the region it downloads that tar.gz from
    sagemaker_container_log_level       the toolkit's own log level (20: INFO)
    sagemaker_torch_distributed_enabled several instances: run the program under torchrun on
                                        every host (one process per GPU, node rank by host order)

Our tar.gz holds the finetune package, requirements.txt (our runtime dependencies the image
lacks; never torch) and finetune_entry.py (finetune/train/sagemaker_entry.py). No setup.py:
with one the toolkit would treat the directory as a package, which torchrun cannot run. It
goes to s3://BUCKET/finetune/code/RUN/, named by its content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from finetune.backends import shipping

CODE_ROOT = "finetune/code/"  # the run's own role may read its prefix (runrole.py)
PROGRAM = "finetune_entry.py"
LOG_LEVEL_INFO = 20


@dataclass(frozen=True)
class SourceDir:
    """The job's source directory: its bytes and where it goes in S3."""

    data: bytes
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def hyperparameters(self, region: str, hosts: int) -> dict[str, str]:
        """The toolkit's sagemaker_* hyperparameters for this source directory."""
        values: dict[str, object] = {
            "sagemaker_program": PROGRAM,
            "sagemaker_submit_directory": self.uri,
            "sagemaker_region": region,
            "sagemaker_container_log_level": LOG_LEVEL_INFO,
        }
        if hosts > 1:  # one host: our entrypoint starts torchrun itself for several GPUs
            values["sagemaker_torch_distributed_enabled"] = True
        return {k: json.dumps(v) for k, v in values.items()}

    def upload(self, s3) -> None:
        """Put the tar.gz in S3 (after the pre-flight checks: nothing is written before)."""
        from finetune.aws import retries
        from finetune.aws.errors import aws_errors

        with aws_errors("PutObject", resource=self.uri):
            retries.call(
                s3.put_object,
                Bucket=self.bucket,
                Key=self.key,
                Body=self.data,
                ContentType="application/gzip",
            )


def build(bucket: str, run_id: str) -> SourceDir:
    """The source directory of run ``run_id``, named by its sha256 under the run's prefix."""
    requirements = "\n".join(shipping.runtime_requirements()) + "\n"
    entry = resources.files("finetune.train").joinpath("sagemaker_entry.py").read_bytes()
    data = shipping.source_tarball({"requirements.txt": requirements.encode(), PROGRAM: entry})
    key = f"{CODE_ROOT}{run_id}/sourcedir-{shipping.sha256_hex(data)[:16]}.tar.gz"
    return SourceDir(data, bucket, key)
