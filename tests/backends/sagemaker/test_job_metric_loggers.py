"""Issue 24 on SageMaker: a torch job whose recipe names metric loggers installs their packages
before AWS's training toolkit starts, from the hashed list inside the checked source directory,
with the ContainerEntrypoint (codecheck.py) the request carries; an install that fails (an image
without them and no route to PyPI: a VPC without NAT) is one warning line and the job goes on.

The entrypoint runs exactly as the request carries it, in an emulated host (tests/namespaces.py:
/opt/ml is the test's), with moto's S3 and real pip in a stand-in for the image's python (a venv
of this machine's packages; tensorboardX left out) with no package index. The one fake: the
toolkit's `train`, a stub that says it started (the toolkit itself: test_toolkit_emulation.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from importlib import metadata
from pathlib import Path

import boto3
import pytest

from finetune.backends import shipping
from finetune.backends.sagemaker import sourcedir
from tests import namespaces
from tests.aws.conftest import BUCKET, REGION
from tests.backends.ec2.instance_host import SYSTEM_PATH, make_standin

ROOT = Path(__file__).resolve().parents[3]
_WHY_NOT = namespaces.unshare_missing()
pytestmark = pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or "")
TRAIN_STUB = '#!/bin/bash\necho "toolkit started: $*" >> "$EMU_LOG"\n'


@pytest.mark.parametrize("image_lacks", [(), ("tensorboardx",)], ids=["has all", "lacks one"])
def test_a_job_with_loggers_installs_them_first_and_trains_when_that_fails(
    aws, tmp_path, image_lacks
):
    code = sourcedir.build(BUCKET, "ft-20261124-203000-a1b2", loggers=True)
    assert code.lock == shipping.METRICS_LOCK
    assert sourcedir.build(BUCKET, "ft-20261124-203000-a1b2").lock == ""  # none named: none
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    code.upload(s3)
    image = make_standin(tmp_path / "image", leave_out=image_lacks)
    (tmp_path / "stubs").mkdir()
    (tmp_path / "stubs" / "train").write_text(TRAIN_STUB)
    (tmp_path / "stubs" / "train").chmod(0o755)
    hosts = namespaces.write_hosts(tmp_path / "hosts", [("algo-1", "127.0.0.2")])
    env = {
        "PATH": f"{tmp_path / 'stubs'}:{image / 'bin'}:{SYSTEM_PATH}",  # python3: the image's
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "S3_ENDPOINT_URL": aws,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PIP_NO_INDEX": "1",  # no route to PyPI
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_LOG": str(tmp_path / "pip.log"),  # pip's own verbose account of what it did
        "EMU_LOG": str(tmp_path / "toolkit.log"),
        **namespaces.environment("algo-1", hosts, tmp_path, tmp_path / "ml"),
    }
    (tmp_path / "ml").mkdir()
    argv = namespaces.command(code.entrypoint(REGION))  # as the request carries it
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    output = out.stdout + out.stderr
    assert out.returncode == 0, output
    assert "finetune: source directory s3://" in output  # checked and unpacked first
    lock = tmp_path / "ml" / "code" / shipping.METRICS_LOCK
    lock_in_job = f"/opt/ml/code/{shipping.METRICS_LOCK}"
    assert lock.read_bytes() == (ROOT / shipping.METRICS_LOCK).read_bytes()
    assert (tmp_path / "toolkit.log").read_text() == "toolkit started: \n"  # it trains
    warning = "finetune-warning the metric loggers' packages did not install (1); the run "
    if not image_lacks:  # pip took the list (every pin already there: nothing to fetch)
        assert "finetune-warning" not in output and "ERROR" not in output, output
        pip_log = (tmp_path / "pip.log").read_text()
        satisfied = re.findall(
            rf"Requirement already satisfied: (\S+)==.* \(from -r {lock_in_job} ", pip_log
        )
        pins = re.findall(r"^([a-z0-9-]+)==", lock.read_text(), re.MULTILINE)
        assert sorted(satisfied) == sorted(pins) and "tensorboardx" in pins, pip_log[-2000:]
        assert "we are trusting this package without checking its hash" in pip_log  # hash mode
        return
    # pip ran on that very list and missed the one package the image lacks
    version = metadata.version("tensorboardX")
    assert f"No matching distribution found for tensorboardx=={version}" in output
    assert warning + "continues without metric loggers" in output
    assert not list(image.glob("lib/python3*/site-packages/tensorboardX"))  # nothing half-done
