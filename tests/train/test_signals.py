"""SIGTERM/SIGINT become a stop request; a second one exits at once."""

from __future__ import annotations

import os
import signal

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


@pytest.mark.slow
def test_a_stop_still_checkpoints_when_whoever_read_the_output_is_gone(tmp_path, tiny_dataset):
    """SIGTERM to a process group kills a parent with no handler (AWS's training toolkit)
    and the pipe it read our output from: the trainer's next line must not end the run
    before its checkpoint (the old trainer died of BrokenPipeError, exit 1, saving nothing)."""
    import subprocess
    import sys

    from finetune.train.signals import EXIT_STOPPED, STOPPED_MARK, read_stopped

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
