"""SIGTERM/SIGINT become a stop request; a second one exits at once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from finetune.train.signals import StopRequest


def test_first_signal_sets_the_flag_second_exits():
    before = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert not stop
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop and stop.signal_name == "SIGTERM"
        with pytest.raises(SystemExit) as exc:
            os.kill(os.getpid(), signal.SIGINT)
        assert exc.value.code == 128 + signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored


def test_a_signal_during_start_up_raises_and_after_it_is_a_flag():
    from finetune.train.signals import StartupStopped

    with StopRequest(starting=True) as stop:
        with pytest.raises(StartupStopped) as exc:
            os.kill(os.getpid(), signal.SIGTERM)
        assert exc.value.signal_name == "SIGTERM" and stop.signal_name == "SIGTERM"
    with StopRequest(starting=True) as stop:
        stop.started()
        os.kill(os.getpid(), signal.SIGINT)  # start-up over: only the flag
        assert stop.signal_name == "SIGINT"


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (/proc: SigCgt)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(status.split("SigCgt:")[1].split()[0], 16)
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.parametrize("engine", ["torch", "mxnet"])
def test_a_sigterm_during_start_up_ends_the_trainer_at_once_with_nothing_saved(
    engine, tmp_path, tiny_dataset
):
    """The trainer is sent SIGTERM as soon as its handler is there, while it imports its
    engine (seconds: torch, torchvision and torch._dynamo; MXNet and GluonCV): it exits 75 with
    the marker, says it stopped during start-up, and neither trains a batch nor writes a
    checkpoint (before, it built its session, trained one batch and saved it)."""
    import time

    from finetune.contracts.container import EXIT_STOPPED, STOPPED_MARK, read_stopped

    from .conftest import hparams, make_tree, start_trainer

    pytest.importorskip(engine)
    hp = hparams(engine=engine, model="resnet18" if engine == "torch" else "resnet18_v1")
    proc = start_trainer(root := make_tree(tmp_path / "ml", tiny_dataset, hp))
    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signal.SIGTERM):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == EXIT_STOPPED, out
    reason = (root / "output" / "failure").read_text()
    assert reason.startswith(STOPPED_MARK) and "during start-up" in reason, reason
    assert read_stopped(root)["signal"] == "SIGTERM" and "Traceback" not in out, out
    assert not list((root / "checkpoints").glob("ckpt-*")), "a checkpoint of nothing"
    assert "finetune-progress" not in out and not (root / "output" / "data").exists(), out


@pytest.mark.slow
def test_a_stop_still_checkpoints_when_whoever_read_the_output_is_gone(tmp_path, tiny_dataset):
    """SIGTERM to a process group kills a parent with no handler (AWS's training toolkit)
    and the pipe it read our output from: the trainer's next line must not end the run
    before its checkpoint (the old trainer died of BrokenPipeError, exit 1, saving nothing)."""
    import subprocess
    import sys

    from finetune.contracts.container import EXIT_STOPPED, STOPPED_MARK, read_stopped

    from .conftest import REPO, hparams, make_tree, trainer_env

    hp = hparams(engine="torch", model="resnet18", loader_workers=0, epochs=3)
    root = make_tree(tmp_path / "ml", tiny_dataset, hp)
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "finetune.train"],
        cwd=REPO,
        env=trainer_env(root, FINETUNE_LOG_EVERY="1"),
        stdout=write,
        stderr=write,
    )
    os.close(write)
    with os.fdopen(read, "rb") as reader:  # the parent reads until the first progress line
        seen = b""
        while b"finetune-progress" not in seen:
            chunk = reader.read1(4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
    # (the reader is closed: the trainer's next write finds a broken pipe)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == EXIT_STOPPED  # stopped, unfinished: not a failure
    assert (root / "output" / "failure").read_text().startswith(STOPPED_MARK)
    assert read_stopped(root)["signal"] == "SIGTERM"
    saved = sorted((root / "checkpoints").glob("ckpt-*"))
    assert saved, "no checkpoint after the stop"
    assert '"reason": "SIGTERM"' in (saved[-1] / "state.json").read_text()
