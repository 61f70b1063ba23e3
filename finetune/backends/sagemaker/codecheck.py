"""The first program of a SageMaker torch job (its ContainerEntrypoint): fetch the job's source
directory, check it against the sha256 the launch computed, unpack it where AWS's training
toolkit looks for it, then start the image's own entrypoint and the toolkit.

Not inside the source directory: whoever replaces the tar.gz in S3 replaces every file in it
(a check there, and the requirements.txt the toolkit pip-installs first, would be theirs).
This file's text travels in the CreateTrainingJob request, which only the launch writes
(sourcedir.py cuts it into ContainerEntrypoint items, the expected sha256 in its last line);
the toolkit finds /opt/ml/code filled and does not download the tar.gz again, so what runs is
what was checked. Standard library and boto3 only: what the image has before our code is in.
"""

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile

CODE_DIR = "/opt/ml/code"  # where the toolkit runs the source directory from
FAILURE = "/opt/ml/output/failure"  # its first 1,024 characters become the FailureReason
IMAGE_ENTRY = "start_with_right_hostname.sh"  # the ENTRYPOINT of AWS's PyTorch training images


def main(uri: str, expected: str, region: str, lock: str = "") -> int:
    """Check and unpack the source directory at ``uri``, install ``lock`` (a hashed list
    inside it) when given, then become the toolkit."""
    try:
        data = _download(uri, region)
    except Exception as exc:  # botocore's errors: say which object and why
        return _fail(
            f"cannot read the job's source directory {uri}: {exc}. "
            "To fix: check that the object exists and the job's role may read it, then "
            "launch the run again."
        )
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        return _fail(
            f"the job's source directory {uri} is not the one finetune launched (sha256 "
            f"{actual[:16]}..., the launch sent {expected[:16]}...): it was replaced in S3 "
            "after the launch, and none of it was run. To fix: launch the run again "
            "(finetune uploads its code anew) and check who may write finetune/code/ in the "
            "bucket."
        )
    _unpack(data)
    print(f"finetune: source directory {uri} checked (sha256 {actual[:16]}...)", flush=True)
    if lock:
        install(os.path.join(CODE_DIR, lock))
    return _start_toolkit()


def install(lock: str) -> bool:
    """pip-install the hashed list ``lock`` (exact versions, no dependency resolution): the
    packages of the metric loggers a recipe names, from PyPI over the job's network, once per
    host before the toolkit. A failure (a VPC without NAT: no route there) is one warning
    line, never the job's end: the metric loggers are optional."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--no-deps"]
    pip += ["--require-hashes", "--timeout", "20", "--retries", "1", "--requirement", lock]
    code: int | Exception
    try:  # a short timeout: without a route to PyPI pip would retry for minutes of GPU time
        code = subprocess.run(pip, timeout=900, check=False).returncode
    except (OSError, subprocess.SubprocessError) as exc:
        code = exc
    if code != 0:
        print(f"finetune-warning the metric loggers' packages did not install ({code}); the "
              "run continues without metric loggers", flush=True)  # fmt: skip
    return code == 0


def _download(uri: str, region: str) -> bytes:
    import boto3

    bucket, _, key = uri[len("s3://") :].partition("/")
    endpoint = os.environ.get("S3_ENDPOINT_URL") or None  # (as the toolkit reads it)
    s3 = boto3.client("s3", region_name=region, endpoint_url=endpoint)
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def _unpack(data: bytes) -> None:
    # SageMaker starts with an empty folder; anything already there would run unchecked
    if os.path.isdir(CODE_DIR):
        for name in os.listdir(CODE_DIR):
            path = os.path.join(CODE_DIR, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.makedirs(CODE_DIR, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(CODE_DIR, filter="data")


def _start_toolkit() -> int:
    """What the image runs without us: its entrypoint script with ``train`` (which sets the
    host name up for the toolkit), or the toolkit's ``train`` where there is no such script."""
    script = shutil.which(IMAGE_ENTRY)
    argv = ["bash", "-m", script, "train"] if script else ["train"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(argv[0], argv)
    return 1  # (not reached: exec replaces this process)


def _fail(message: str) -> int:
    sys.stderr.write(f"finetune: {message}\n")
    try:
        os.makedirs(os.path.dirname(FAILURE), exist_ok=True)
        with open(FAILURE, "w", encoding="utf-8") as f:
            f.write(message)
    except OSError:
        pass  # the log line above still says why
    return 1
