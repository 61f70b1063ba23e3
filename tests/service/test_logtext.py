"""`runs logs` prints a remote log without its terminal escape sequences: what the training
code (or a forged log stream) writes must not retitle, clear or rewrite the reader's terminal,
nor set its clipboard."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.runs.ledger import open_default
from finetune.runs.run import Run
from finetune.service.launch import runs_dir
from finetune.service.logtext import printable

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"

CASES = [
    ("colour (CSI SGR)", f"{ESC}[31mred{ESC}[0m", "red"),
    ("clear screen, cursor home", f"{ESC}[2J{ESC}[Hok", "ok"),
    ("private mode (hide cursor)", f"{ESC}[?25lok", "ok"),
    ("window title (OSC, BEL)", f"{ESC}]0;pwned{BEL}ok", "ok"),
    ("clipboard write (OSC 52, ST)", f"{ESC}]52;c;Y3VybCBldmls{ST}ok", "ok"),
    ("hyperlink (OSC 8)", f"{ESC}]8;;https://evil.example{ST}link{ESC}]8;;{ST}", "link"),
    ("DCS string", f"{ESC}P1$r0m{ST}ok", "ok"),
    ("reset terminal (ESC c)", f"{ESC}cok", "ok"),
    ("charset switch (ESC ( 0)", f"{ESC}(0ok", "ok"),
    ("unterminated CSI at the end", f"ok{ESC}[", "ok"),
    ("8-bit CSI (C1)", "\x9b2Jok", "ok"),
    ("backspaces hiding text", "rm -rf /\x08\x08\x08\x08\x08\x08\x08\x08safe", "rm -rf /safe"),
    ("bell, NUL, DEL, form feed, vertical tab", "a\x07b\x00c\x7fd\x0ce\x0bf", "abcdef"),
    ("carriage return overwriting a line", "epoch 1 done\rall good", "epoch 1 done\nall good"),
    ("CRLF", "one\r\ntwo\r\n", "one\ntwo\n"),
    ("tabs, newlines and text stay", "a\tb\nc é ✓ 日本\n", "a\tb\nc é ✓ 日本\n"),
]


@pytest.mark.parametrize("raw, want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_printable_strips_escapes_and_controls(raw, want):
    assert printable(raw) == want


def test_runs_logs_prints_a_hostile_log_safely():
    run_id = "ft-20261124-0000-beef"
    folder = runs_dir() / run_id
    folder.mkdir(parents=True)
    hostile = f"step 1\n{ESC}]0;owned{BEL}{ESC}[2J{ESC}]52;c;ZXZpbA=={BEL}step 2\x9b31m\n"
    (folder / "train.log").write_text(hostile, encoding="utf-8")
    run = Run(run_id, time.time(), "smoke", "shapes", "local", "completed", {}, run_dir=str(folder))
    with open_default() as ledger:
        ledger.create(run)
    res = CliRunner().invoke(app, ["runs", "logs", run_id])
    assert res.exit_code == 0, res.output
    assert res.output == "step 1\nstep 2\n"
