"""The training image's Dockerfile names every piece the trainer needs (no Docker on CI:
the file is read, not built)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from .conftest import REPO

DOCKERFILE = REPO / "Dockerfile"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        current += " " + line[:-1] if line.endswith("\\") else " " + line
        if not line.endswith("\\"):
            logical.append(current.strip())
            current = ""
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in logical]


@pytest.fixture(scope="module")
def parsed():
    return instructions()


def _args(parsed, name: str) -> list[str]:
    return [args for instr, args in parsed if instr == name]


def _runs(parsed) -> str:
    return " ".join(_args(parsed, "RUN"))


def test_base_image_has_cuda_11_2_and_cudnn_8(parsed):
    (base,) = _args(parsed, "FROM")
    assert re.fullmatch(r"nvidia/cuda:11\.2\.\d+-cudnn8-runtime-ubuntu\d+\.\d+", base)


def test_engine_pins(parsed):
    runs = _runs(parsed)
    assert "mxnet-cu112==1.9.1" in runs
    assert re.search(r"uv pip install --no-deps gluoncv==0\.10\.5\.post0", runs)
    # every install that resolves dependencies is held by the constraints file (numpy<1.24)
    installs = re.findall(r"uv pip install ([^&]*)", runs)
    for args in installs:
        assert "--no-deps" in args or "-c /tmp/constraints.txt" in args, args
    copied = [a for a in _args(parsed, "COPY") if "constraints.txt" in a]
    assert copied == ["requirements/constraints.txt /tmp/constraints.txt"]
    pins = (REPO / "requirements" / "constraints.txt").read_text()
    (numpy,) = re.findall(r"^numpy==1\.(\d+)\.\d+$", pins, re.MULTILINE)
    assert int(numpy) < 24


def test_python_satisfies_the_package(parsed):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    from packaging.specifiers import SpecifierSet

    assert SpecifierSet(project["requires-python"]).contains("3.11")
    assert "uv venv --python 3.11 /opt/venv" in _runs(parsed)


def test_the_package_is_installed(parsed):
    copies = _args(parsed, "COPY")
    assert "finetune ./finetune" in copies and "pyproject.toml README.md ./" in copies
    # with the metric loggers' extra, so an MXNet run that names them has them too
    assert re.search(r'uv pip install -c /tmp/constraints.txt "\.\[metrics\]"(\s|$)', _runs(parsed))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "metrics" in project["optional-dependencies"]
    ignore = (REPO / ".dockerignore").read_text().split()
    for needed in ("pyproject.toml", "README.md", "requirements/constraints.txt", "finetune/"):
        assert f"!{needed}" in ignore
        assert (REPO / needed).exists()


def test_entrypoint_is_the_trainer_and_nothing_overrides_train(parsed):
    """SageMaker runs `docker run IMAGE train`: an exec-form entrypoint (signals reach
    Python as PID 1) that accepts the `train` argument, and no CMD."""
    (entry,) = _args(parsed, "ENTRYPOINT")
    assert json.loads(entry) == ["python", "-m", "finetune.train"]
    assert not _args(parsed, "CMD")
    assert "/opt/venv/bin" in " ".join(_args(parsed, "ENV"))  # that `python` is the venv's


def test_an_unprivileged_user_exists(parsed):
    assert re.search(r"useradd [^&]*finetune", _runs(parsed))
