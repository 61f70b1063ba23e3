"""Issue 23 #5 and #6 (SageMaker): the job's source directory lies in S3 where other SageMaker
callers may write, so the request itself carries the program that checks it (ContainerEntrypoint:
codecheck.py with the tar.gz's sha256) and the toolkit's requirements.txt resolves nothing from
an index. The job run end to end with a replaced tar.gz is in test_toolkit_emulation.py."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

import boto3

from finetune.backends.sagemaker import codecheck
from finetune.backends.sagemaker.backend import SageMakerBackend
from finetune.backends.shipping import name_of, runtime_requirements
from finetune.plan import Resources, build_plan
from tests.aws.conftest import BUCKET, REGION
from tests.aws.helpers import new_run


def _submitted(cloud, dataset, tmp_path) -> tuple[dict, bytes]:
    res = Resources(backend="sagemaker", instance_type="g5.xlarge", devices_per_host=1,
                    device="gpu")  # fmt: skip
    plan = build_plan("smoke-resnet18-torch", dataset, res)
    SageMakerBackend().submit(plan, new_run(tmp_path, plan))
    (call,) = cloud.requests("CreateTrainingJob")
    uri = json.loads(call.json["HyperParameters"]["sagemaker_submit_directory"])
    body = boto3.client("s3", region_name=REGION).get_object(
        Bucket=BUCKET, Key=uri.split("/", 3)[3]
    )
    return call.json, body["Body"].read()


def test_the_request_carries_the_check_and_the_job_installs_from_no_index(
    cloud, tiny_dataset, tmp_path
):
    req, uploaded = _submitted(cloud, tiny_dataset, tmp_path)
    entry = req["AlgorithmSpecification"]["ContainerEntrypoint"]
    assert entry[:2] == ["python3", "-c"]
    assert len(entry) <= 100 and all(len(item) <= 256 for item in entry)  # the API's limits
    # python -c STUB ITEMS...: sys.argv is ["-c", ITEMS...]; the stub joins all the items
    n = re.fullmatch(r"import sys;exec\(''\.join\(sys\.argv\[1:(\d+)\]\)\)", entry[2])
    assert n and int(n[1]) - 1 == len(entry) - 3
    code = "".join(entry[3:])
    with open(codecheck.__file__, encoding="utf-8") as f:
        source = f.read()
    uri = json.loads(req["HyperParameters"]["sagemaker_submit_directory"])
    sha = hashlib.sha256(uploaded).hexdigest()  # the oracle: what is in S3 right now
    assert code == source + f"\nsys.exit(main({uri!r}, {sha!r}, {REGION!r}))\n"
    compile(code, "<ContainerEntrypoint>", "exec")
    _check_requirements(uploaded, tmp_path)


def _check_requirements(uploaded: bytes, tmp_path) -> None:
    with tarfile.open(fileobj=io.BytesIO(uploaded), mode="r:gz") as tar:
        text = tar.extractfile("requirements.txt").read().decode()
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    assert lines[0] == "--no-index"
    wanted = [r for r in runtime_requirements() if name_of(r) in ("pydantic", "pillow")]
    assert lines[1:] == wanted and len(wanted) == 2
    assert not any(name_of(x) in ("typer", "rich", "currencyconverter") for x in lines)
    # pip with an index that cannot be reached: the file installs from what is there alone
    (tmp_path / "requirements.txt").write_text(text)
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
           "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": os.devnull}  # fmt: skip
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "-r", "requirements.txt"]
    out = subprocess.run(pip, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "127.0.0.1:9" not in out.stdout + out.stderr  # never asked
