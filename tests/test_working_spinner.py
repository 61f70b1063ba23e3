"""`export` and `predict` show a spinner on a terminal while the engine loads (a real
pseudo-terminal, the real CLI in a subprocess), and add nothing to a pipe."""

from __future__ import annotations

from tests.terminal import cli_on_a_terminal


def _on_a_terminal(*args: str) -> str:
    return cli_on_a_terminal(list(args))


def test_export_shows_a_spinner_on_a_terminal():
    shown = _on_a_terminal("export", "ft-no-such-run")
    assert "Exporting ft-no-such-run's model" in shown and "no run 'ft-no-such-run'" in shown
    # (on a pipe nothing is added: the predict tests parse its --format json output whole)
