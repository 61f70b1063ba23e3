"""Errors a user can act on. Every message says what was wrong and how to fix it."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable


class FinetuneError(Exception):
    """Base of every error the CLI turns into a message and a non-zero exit code."""

    exit_code = 1
    # what a failed step may have left in the cloud (a launch whose undo failed too): the
    # caller then keeps the run's record, so the user can see, stop and clean them
    left: tuple[str, ...] = ()

    def __init__(self, what: str, fix: str | None = None) -> None:
        self.what = what
        self.fix = fix
        super().__init__(what)

    def __str__(self) -> str:
        return f"{self.what}\nTo fix: {self.fix}" if self.fix else self.what


class UsageError(FinetuneError):
    """The command line asks for something inconsistent or impossible."""

    exit_code = 2


class BusyError(UsageError):
    """Another live process holds what the command needs (a run's lock); nothing changed."""


class DataError(FinetuneError):
    """Input data (images, archives, prepared datasets) is missing, corrupt or inconsistent."""

    exit_code = 3


class RecordIOError(DataError):
    """A RecordIO file or its index is malformed."""


class ConfigError(FinetuneError):
    """A recipe, setting or override is invalid."""

    exit_code = 4


class DependencyError(FinetuneError):
    """An optional dependency (the training engine, the AWS SDK) is not installed."""

    exit_code = 5


class CloudError(FinetuneError):
    """AWS refused or failed a request."""

    exit_code = 6


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ' Did you mean "x"?' for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f' Did you mean "{close[0]}"?' if close else ""


def require_module(module: str, extra: str = "mxnet"):
    """Import an optional heavy dependency or raise a DependencyError that says how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyError(
            f"This command needs the Python package {module!r}, which is not installed ({exc}).",
            f"run `bash scripts/setup.sh` (installs the [{extra}] extra with the right pins).",
        ) from exc
