"""The library calls behind `launch`, `runs` and `cleanup`: they sit above the backends
(they choose one by name and ask it what the Protocol offers) and keep the ledger true to
what the backends report. cli/ parses, calls one of these, and renders."""

from finetune.service.launch import (
    LaunchRequest,
    Planned,
    check_features,
    launch,
    new_run,
    plan_launch,
    resume,
    runs_dir,
    start,
    submit,
)
from finetune.service.logtext import read_logs
from finetune.service.sync import Follow, follow, listing, refreshed, stop, sync
from finetune.service.weights import fetch as fetch_weights

__all__ = [
    "Follow",
    "LaunchRequest",
    "Planned",
    "check_features",
    "fetch_weights",
    "follow",
    "launch",
    "listing",
    "new_run",
    "plan_launch",
    "read_logs",
    "refreshed",
    "resume",
    "runs_dir",
    "start",
    "stop",
    "submit",
    "sync",
]
