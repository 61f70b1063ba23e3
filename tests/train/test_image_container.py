"""SageMaker's contract with the training image, executed: `docker run IMAGE train` on an /opt/ml
tree laid out as SageMaker lays it out (the channels' files in the tree, checkpointconfig's
LocalPath /opt/ml/checkpoints), under a real container runtime (tests/containerhost.py) with
the image built from the project's Dockerfile. The image's default user (root, as SageMaker
needs for the /opt/ml it mounts) trains to a model; `docker stop` (what StopTrainingJob and
a spot reclaim do) sends SIGTERM, which reaches the trainer before the stop timeout: the
checkpoint is written, the stop marker left, exit 75. podman 4.3's `docker run --rm` always
exits 0, so the containers run without --rm and are removed after their exit code was read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from finetune.contracts import mltree
from finetune.contracts.container import EXIT_STOPPED, MODEL_FILES, STOPPED_FILE
from finetune.plan import Resources, build_plan
from tests import containerhost

_WHY_NOT = containerhost.runtime_missing()
pytestmark = [
    pytest.mark.container,
    pytest.mark.slow,
    pytest.mark.skipif(bool(_WHY_NOT), reason=_WHY_NOT or ""),
]


def _tree(root: Path, dataset: Path, epochs: int) -> Path:
    """The /opt/ml tree of an MXNet smoke run, as SageMaker gives it to the container."""
    plan = build_plan("smoke-resnet18", dataset, Resources(backend="local", device="cpu"),
                      [f"schedule.epochs={epochs}", "schedule.steps=[]"])  # fmt: skip
    assert plan.hyperparameters.engine == "mxnet"
    mltree.layout(root, plan)
    for link in (root / "input" / "data").rglob("*"):
        if link.is_symlink():  # SageMaker downloads the channels into the tree
            target = link.resolve()
            link.unlink()
            shutil.copyfile(target, link)
    config = root / "input" / "config" / "checkpointconfig.json"
    config.write_text(json.dumps({"LocalPath": "/opt/ml/checkpoints"}))
    return root


@pytest.fixture
def container():
    """A container name of the test's own (xdist workers share the runtime), removed
    afterwards, running or not."""
    name = f"finetune-sagemaker-{uuid.uuid4().hex[:12]}"
    yield name
    containerhost.remove(name)


def test_docker_run_image_train_writes_the_model_as_root(
    training_image, tiny_dataset, tmp_path, container
):
    root = _tree(tmp_path / "ml", tiny_dataset, epochs=1)
    out = containerhost.docker(
        "run", "--name", container, "--volume", f"{root}:/opt/ml", training_image, "train",
        check=False, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "training complete: 1 epoch(s), model in /opt/ml/model" in out.stdout
    for name in MODEL_FILES:
        assert (root / "model" / name).stat().st_uid == 0  # SageMaker's user: root
    assert not (root / "output" / "failure").exists()


def test_docker_stop_reaches_the_trainer_which_checkpoints_and_exits_75(
    training_image, tiny_dataset, tmp_path, container
):
    root = _tree(tmp_path / "ml", tiny_dataset, epochs=200)
    log = tmp_path / "docker-run.log"
    argv = ["docker", "run", "--name", container, "--stop-timeout", "60",
            "--env", "FINETUNE_LOG_EVERY=1", "--volume", f"{root}:/opt/ml",
            training_image, "train"]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "finetune-progress epoch=0 batch=1/" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        started = time.monotonic()
        containerhost.docker("stop", container, timeout=90)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert code == EXIT_STOPPED, text[-3000:]
    assert time.monotonic() - started < 60  # SIGTERM, not the SIGKILL after the stop timeout
    assert "stopped by SIGTERM, checkpoint saved" in text
    assert (root / "output" / STOPPED_FILE).exists()
    assert list((root / "checkpoints").rglob("COMPLETE")), list((root / "checkpoints").rglob("*"))
    inspect = containerhost.docker("inspect", "--format", "{{.State.ExitCode}}", container)
    assert inspect.stdout.strip() == str(EXIT_STOPPED)
