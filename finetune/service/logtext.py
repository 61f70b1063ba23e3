"""A remote log, made safe to print: the trainer's output travels through CloudWatch or an
instance's train.log, and anything that can write there (the training code, a dependency, a
forged stream) could otherwise drive the reader's terminal -- retitle it, rewrite the screen,
set the clipboard (OSC 52), hide lines. Everything but text, newlines and tabs goes
(finetune.textsafe: the one filter every output of remote strings uses)."""

from __future__ import annotations

import re

from finetune.contracts.metrics import EpochMetrics
from finetune.report.text import duration, percent
from finetune.textsafe import printable, remote

__all__ = ["epoch_text", "for_people", "log_for_people", "printable", "read_logs", "remote"]


def read_logs(run, backend, offset: int = 0) -> tuple[str, int]:
    """The run's log from byte ``offset`` on, printable, and the offset to continue from."""
    text, offset = backend.logs(run, offset)
    return printable(text), offset


# the trainer's key=value lines that name an epoch (others, e.g. finetune-warning, are text)
_MACHINE = re.compile(r"finetune-(?P<kind>metrics|progress|telemetry|resume|test) (?P<fields>.*)")


def epoch_text(e) -> str:
    """A finished epoch (contracts.metrics.EpochMetrics) for people, counted from 1 as
    `runs show` counts: 'epoch 3: 812.4 img/s, 1m 02s, loss 0.412, train_acc ...'."""
    val = f" val_acc {percent(e.val_acc)}" if e.val_acc is not None else ""
    return (
        f"epoch {e.epoch + 1}: {e.samples_per_sec:,.1f} img/s, {duration(e.epoch_seconds)}, "
        f"loss {e.train_loss:.3f}, train_acc {percent(e.train_acc)}{val}, lr {e.lr:.3g}"
    )


def for_people(line: str) -> str | None:
    """A trainer's log line as people read it (None: nothing to show). Its machine lines
    (``finetune-<kind> key=value ...``) count epochs from 0, the metrics contract that
    SageMaker's metric definitions and the readers parse; here they count from 1, as `runs
    show` does: an epoch's metrics line becomes epoch_text, a progress line (the live bar's
    input, every few seconds) goes, any other ('telemetry', 'resume', 'test') names its
    epoch and keeps its other fields. Every other line stays as it is."""
    found = _MACHINE.search(line)
    if found is None:
        return line
    kind, head = found["kind"], line[: found.start()]
    fields = dict(f.split("=", 1) for f in found["fields"].split() if "=" in f)
    if kind == "progress":
        return None
    if kind == "metrics":
        try:
            return head + epoch_text(EpochMetrics.model_validate(fields))
        except ValueError:
            return line
    words = [_one_based(w) for w in found["fields"].split()]
    at = next((i for i, w in enumerate(words) if w.startswith("epoch=")), None)
    if at is None:
        return head + f"{kind}: " + " ".join(words)
    epoch = words.pop(at)[len("epoch=") :]  # already counted from 1 by _one_based
    return head + f"{kind}, epoch {epoch}: " + " ".join(words)


def _one_based(word: str) -> str:
    """'epoch=2' or 'best_epoch=2' -> ...=3: an epoch a machine field names, for people."""
    key, _, value = word.partition("=")
    named = key == "epoch" or key.endswith("_epoch")
    return f"{key}={int(value) + 1}" if named and value.isdigit() else word


def log_for_people(text: str) -> str:
    """A log's lines through for_people (its lines, whole: the caller splits at newlines)."""
    lines = [for_people(line) for line in text.splitlines()]
    return "".join(f"{line}\n" for line in lines if line is not None)
