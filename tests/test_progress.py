"""Live progress: the trainer's progress lines, and how a terminal (or a pipe) shows them."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from finetune.cli import app
from finetune.cli._progress import EpochDisplay
from finetune.contracts.metrics import BatchProgress, parse_progress


def _line(epoch: int, batch: int, steps: int = 50) -> str:
    p = BatchProgress(epoch=epoch, batch=batch, steps=steps, step=epoch * steps + batch,
                      lr=0.01, train_loss=2.07, images=8 * batch, seconds=batch * 0.5,
                      images_per_sec=16.0)  # fmt: skip
    return p.log_line()


def test_progress_lines_round_trip_even_inside_other_log_formats():
    line = _line(0, 12)
    assert line.startswith("finetune-progress epoch=0 batch=12/50 step=12 ")
    p = parse_progress("2026-01-01T00:00:00Z algo-1 " + line)  # as CloudWatch shows it
    assert (p.epoch, p.batch, p.steps, p.images, p.train_loss) == (0, 12, 50, 96, 2.07)
    assert p.eta_seconds == 6.0 * 38 / 12  # 0.5 s a batch so far, 38 to go
    old = parse_progress("finetune-progress epoch=1 batch=3/9 step=12 lr=0.1 train_loss=nan")
    assert old.batch == 3 and old.train_loss is None and old.eta_seconds is None
    assert parse_progress("finetune-metrics epoch=0 train_acc=0.5") is None
    assert parse_progress("finetune-progress epoch=x batch=1/2") is None


def test_a_terminal_gets_one_bar_per_epoch():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    display = EpochDisplay(2, console=console).start()
    rest = display.feed("\n".join(["loading weights", _line(0, 12), _line(0, 50)]))
    display.epoch_done(0)
    display.echo("  epoch 1: 16.0 img/s")
    display.feed(_line(1, 25))
    display.stop()
    text = out.getvalue()
    assert rest == ["loading weights"]  # everything that is not progress is handed back
    for part in ("epoch 1/2", "50/50", "epoch 2/2", "25/50", "16.0 img/s", "loss 2.070"):
        assert part in text, part
    assert "0:12 left" in text  # epoch 2: 12.5 s for 25 batches, 25 to go


def test_without_a_terminal_a_plain_line_now_and_then(capsys):
    display = EpochDisplay(2).start()  # stderr is not a terminal under pytest
    for batch in (10, 20, 30, 50):
        display.feed(_line(0, batch))
    display.stop()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [  # the first, then the epoch's end (the others within 10 s)
        "  epoch 1/2: 10/50 steps, 16.0 img/s, loss 2.070, 0:20 left",
        "  epoch 1/2: 50/50 steps, 16.0 img/s, loss 2.070, 0:00 left",
    ]


def test_quiet_shows_no_progress(capsys):
    out = io.StringIO()
    display = EpochDisplay(2, quiet=True, console=Console(file=out, force_terminal=True))
    display.start()
    assert display.feed(_line(0, 10) + "\nhello") == ["hello"]
    display.stop()
    assert out.getvalue() == "" and capsys.readouterr().err == ""
    res = CliRunner().invoke(app, ["--quiet", "runs", "list"])
    assert res.exit_code == 0 and "No runs yet" in res.output
