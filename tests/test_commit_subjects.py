"""Commit subjects say what changed in at most 72 characters; the why and the figures go in
the body. Held for every commit after the rule was made (house-3, 2026-11-28)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULE_SINCE = "fb8ea18"  # the last commit before the rule: its subjects are history
LIMIT = 72  # git's own convention (git-commit(1), "DISCUSSION"): a subject fits a log line


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def test_commit_subjects_fit_a_line():
    if shutil.which("git") is None or _git("rev-parse", "--git-dir").returncode:
        pytest.skip("not a git checkout")
    if _git("merge-base", "--is-ancestor", RULE_SINCE, "HEAD").returncode:
        pytest.skip(f"{RULE_SINCE} is not in this checkout's history (a shallow clone)")
    subjects = _git("log", "--format=%h %s", f"{RULE_SINCE}..HEAD").stdout.splitlines()
    long = [s for s in subjects if len(s.split(" ", 1)[1]) > LIMIT]
    assert long == [], f"commit subjects over {LIMIT} characters (put the detail in the body)"
