"""`finetune image push`: docker build/login/push (a recording stand-in for the docker CLI)
with the ECR token from moto; without a Docker engine, a clear error and no AWS calls."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from typer.testing import CliRunner

from finetune.cli import app

from .conftest import REGION

FAKE_DOCKER = """#!/bin/sh
echo "ARGS $*" >> "$DOCKER_LOG"
if [ "$1" = login ]; then
  printf 'STDIN ' >> "$DOCKER_LOG"; cat >> "$DOCKER_LOG"; echo >> "$DOCKER_LOG"
fi
if [ "$1" = info ] && [ -n "$DOCKER_DOWN" ]; then
  echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1
fi
exit 0
"""


def fake_docker(tmp_path, monkeypatch):
    """A `docker` on PATH that records its arguments (and stdin for login) to a log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("DOCKER_LOG", str(log))
    return log


def test_push_builds_logs_in_and_pushes(cloud, tmp_path, monkeypatch):
    log = fake_docker(tmp_path, monkeypatch)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path), "--tag", "t1"])
    assert res.exit_code == 0, res.output
    uri = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/finetune:t1"
    assert res.output.strip().endswith(uri)
    lines = log.read_text().splitlines()
    assert lines[0] == "ARGS info"
    assert lines[1].startswith(
        f"ARGS build --platform linux/amd64 -t {uri} -f {tmp_path}/Dockerfile"
    )
    assert (
        lines[2]
        == f"ARGS login --username AWS --password-stdin https://123456789012.dkr.ecr.{REGION}.amazonaws.com"
    )
    assert lines[3] == "STDIN 123456789012-auth-token"  # the password only on stdin
    assert lines[4] == f"ARGS push {uri}"
    assert cloud.actions() == ["GetCallerIdentity", "GetAuthorizationToken"]


def test_no_docker_engine_says_to_pass_image(cloud, tmp_path, monkeypatch):
    fake_docker(tmp_path, monkeypatch)
    monkeypatch.setenv("DOCKER_DOWN", "1")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path)])
    assert res.exit_code == 5
    assert "No Docker engine answers here" in res.output and "--image URI" in res.output
    assert cloud.calls == []


def test_no_dockerfile(cloud, tmp_path):
    res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path)])
    assert res.exit_code == 3 and "no Dockerfile" in res.output


PINNED = "sha256:" + "ab" * 32
PINNABLE = "ARG BASE=nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04\nARG BASE_DIGEST={}\n"
PINNABLE += "FROM ${{BASE}}${{BASE_DIGEST}}\n"


def _build_line(log) -> str:
    return next(line for line in log.read_text().splitlines() if line.startswith("ARGS build"))


def test_a_given_base_digest_reaches_the_build_args(cloud, tmp_path, monkeypatch):
    """Issue 49, N4: the base is pinned by digest: --base-digest (or the Dockerfile's own
    BASE_DIGEST default) becomes `--build-arg BASE_DIGEST=@sha256:...`."""
    log = fake_docker(tmp_path, monkeypatch)
    (tmp_path / "Dockerfile").write_text(PINNABLE.format(""))
    args = ["image", "push", "--context", str(tmp_path), "--tag", "t2"]
    res = CliRunner().invoke(app, [*args, "--base-digest", PINNED])
    assert res.exit_code == 0, res.output
    assert f" --build-arg BASE_DIGEST=@{PINNED} " in _build_line(log)
    recorded = "sha256:" + "cd" * 32
    (tmp_path / "Dockerfile").write_text(PINNABLE.format("@" + recorded))
    log.unlink()
    res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path), "--tag", "t3"])
    assert res.exit_code == 0, res.output
    assert f" --build-arg BASE_DIGEST=@{recorded} " in _build_line(log)


def test_an_unpinned_or_malformed_base_is_refused_before_anything(cloud, tmp_path, monkeypatch):
    log = fake_docker(tmp_path, monkeypatch)
    (tmp_path / "Dockerfile").write_text(PINNABLE.format(""))
    for extra, said in (([], "base is not pinned"), (["--base-digest", "latest"], "not sha256")):
        res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path), *extra])
        assert res.exit_code == 2 and said in res.output, res.output
        assert "To fix:" in res.output and "imagetools inspect" in res.output
        assert "Traceback" not in res.output
    assert not log.exists() and cloud.calls == []  # no build, no login, no AWS call
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")  # no BASE_DIGEST to set
    res = CliRunner().invoke(app, ["image", "push", "--context", str(tmp_path),
                                   "--base-digest", PINNED])  # fmt: skip
    assert res.exit_code == 2 and "no BASE_DIGEST argument" in res.output


def test_finetunes_dockerfile_takes_the_digest(cloud, tmp_path, monkeypatch):
    """The project's own Dockerfile records its base's digest: image push pins it by default,
    and a given one replaces it."""
    root = Path(__file__).resolve().parents[2]
    (recorded,) = re.findall(r"^ARG BASE_DIGEST=@(sha256:[0-9a-f]{64})$",
                             (root / "Dockerfile").read_text(), re.MULTILINE)  # fmt: skip
    log = fake_docker(tmp_path, monkeypatch)
    args = ["image", "push", "--context", str(root)]
    res = CliRunner().invoke(app, [*args, "--tag", "t4"])
    assert res.exit_code == 0, res.output
    assert f" --build-arg BASE_DIGEST=@{recorded} " in _build_line(log)
    log.unlink()
    res = CliRunner().invoke(app, [*args, "--tag", "t5", "--base-digest", PINNED])
    assert res.exit_code == 0, res.output
    assert f" --build-arg BASE_DIGEST=@{PINNED} " in _build_line(log)
