"""Garbage collection in a trainer process's start-up: off until the run is set up, then
one collection, everything alive frozen, and the collector on again for what training makes
(the objects of torch's or MXNet's import are never walked again, not even at exit).
docs/decisions/003-trainer-startup-gc.md says what it saves."""

from __future__ import annotations

import gc

_deferred = False


def defer() -> None:
    """Collect nothing until :func:`setup_done` (this process's entry calls it first thing)."""
    global _deferred
    gc.disable()
    _deferred = True


def setup_done() -> None:
    """What start-up made is frozen and the collector is on again; once, after :func:`defer`."""
    global _deferred
    if _deferred:
        _deferred = False
        gc.collect()  # start-up's garbage is freed, not frozen
        gc.freeze()
        gc.enable()
