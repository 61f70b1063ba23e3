"""`finetune demo` shows a live bar while each run trains, as `launch` does when it follows
a local run (a real pseudo-terminal, the real CLI in a subprocess). Without a terminal it
adds nothing: test_demo's CliRunner run checks that, on a run it makes anyway. Three real
trainings (a bar needs a trainer's progress lines): about 30 s on an idle 2-core machine."""

from __future__ import annotations

import pytest

from tests.terminal import cli_on_a_terminal

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # three real trainings

ARGS = ["demo", "--classes", "2", "--per-class", "16", "--epochs", "1"]


def _on_a_terminal(args: list[str]) -> str:
    # a progress line every step (the trainer's own knob): these trainings last seconds, fewer
    # than its default interval, and the bar moves on progress lines
    return cli_on_a_terminal(args, timeout=120, FINETUNE_LOG_EVERY="1")


def test_the_demo_shows_a_live_bar_while_it_trains_on_a_terminal(tmp_path):
    shown = _on_a_terminal([*ARGS, "--dir", str(tmp_path)])
    assert "5/5 Report" in shown, shown
    # the bar: 'epoch 1/1 ━━━ 2/2 ... img/s loss ... left', drawn while the runs train
    assert "epoch 1/1" in shown and "━" in shown, shown
    assert " img/s loss " in shown and " left" in shown, shown
    assert "  epoch 1: " in shown  # the finished epoch's line as well, as on a pipe
