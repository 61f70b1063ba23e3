"""The training image's Dockerfile names every piece the trainer needs, read as text (the
container tier, tests/containerhost.py, builds it and runs it)."""

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


def _arg(parsed, name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in _args(parsed, "ARG") if a.split("=", 1)[0] == name]
    return value


def test_base_image_has_cuda_11_and_cudnn_8_pinned_by_digest(parsed):
    (base,) = _args(parsed, "FROM")
    assert base == "${BASE}${BASE_DIGEST}"  # tests/containerhost.py swaps BASE for its own
    # CUDA 11 (libmxnet.so's sonames: docs/decisions/101), on a supported Ubuntu
    base_tag = _arg(parsed, "BASE")
    assert re.fullmatch(r"nvidia/cuda:11\.\d+\.\d+-cudnn8-runtime-ubuntu22\.04", base_tag)
    assert re.fullmatch(r"@sha256:[0-9a-f]{64}", _arg(parsed, "BASE_DIGEST"))


def _lock_pins(name: str) -> dict[str, str]:
    text = (REPO / "requirements" / name).read_text()
    return dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text, re.MULTILINE))


def test_every_install_is_hashed_and_resolves_nothing(parsed):
    runs = " ".join(_runs(parsed).split())
    installs = [
        args
        for run in _args(parsed, "RUN")
        for args in re.findall(r"(?:uv pip|-m pip) install ([^&]*)", run)
    ]
    assert len(installs) == 3, installs  # uv; the image lock; this package
    for args in installs:
        assert "--no-deps" in args, args
        assert "--require-hashes" in args or args.split()[-1] == ".", args
    assert 'uv pip install --require-hashes --no-deps $PIP_ARGS -r "$LOCK"' in runs
    assert _arg(parsed, "LOCK") == "/tmp/image.lock"
    assert "requirements/image.lock requirements/dev.lock /tmp/" in _args(parsed, "COPY")
    # uv, setuptools and wheel are the dev lock's entries, their hashes included
    assert "entry uv > /tmp/uv.txt" in runs and "entry setuptools; entry wheel;" in runs
    assert "ghcr.io" not in DOCKERFILE.read_text()  # no image besides the base
    image = _lock_pins("image.lock")
    assert image["mxnet-cu112"] == "1.9.1" and image["gluoncv"] == "0.10.5.post0"
    assert "mxnet" not in image  # the CPU wheel stays out of the GPU image
    assert int(image["numpy"].split(".")[1]) < 24
    assert "uv" in _lock_pins("dev.lock")


def test_python_satisfies_the_package(parsed):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    from packaging.specifiers import SpecifierSet

    assert SpecifierSet(project["requires-python"]).contains("3.11")
    assert "/opt/uv/bin/uv venv --python 3.11 /opt/venv" in " ".join(_runs(parsed).split())


def test_the_package_is_installed_with_what_it_needs_in_the_lock(parsed):
    copies = _args(parsed, "COPY")
    assert "finetune ./finetune" in copies and "pyproject.toml README.md ./" in copies
    assert "uv pip install --no-deps --no-build-isolation ." in _runs(parsed)
    # the agent's boto3 and the metric loggers' extra: an MXNet run that names them has them
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    image = {n.lower() for n in _lock_pins("image.lock")}
    for req in [*project["dependencies"], *project["optional-dependencies"]["metrics"], "boto3"]:
        name = re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")
        assert name in image, name
    ignore = (REPO / ".dockerignore").read_text().split()
    needed = ("pyproject.toml", "README.md", "requirements/image.lock", "requirements/dev.lock")
    for path in (*needed, "finetune/"):
        assert f"!{path}" in ignore
        assert (REPO / path).exists()


def test_entrypoint_is_the_trainer_and_nothing_overrides_train(parsed):
    """SageMaker runs `docker run IMAGE train`: an exec-form entrypoint (signals reach
    Python as PID 1) that accepts the `train` argument, and no CMD."""
    (entry,) = _args(parsed, "ENTRYPOINT")
    assert json.loads(entry) == ["python", "-m", "finetune.train"]
    assert not _args(parsed, "CMD")
    assert "/opt/venv/bin" in " ".join(_args(parsed, "ENV"))  # that `python` is the venv's


def test_an_unprivileged_user_exists(parsed):
    assert re.search(r"useradd [^&]*finetune", _runs(parsed))
