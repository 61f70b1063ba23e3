"""An ec2.json whose attempts are missing or never closed reads as a clear status or error, not
an AttributeError on None or a Status whose state is None (found by the type checker)."""

from __future__ import annotations

import pytest

from finetune.backends.ec2.instances import lifecycle
from finetune.backends.ec2.options import Ec2Options
from finetune.backends.ec2.state import AttemptRecord, Ec2State
from finetune.errors import DataError


def _state(*attempts: AttemptRecord) -> Ec2State:
    return Ec2State("us-east-1", "b", "p/", "s3://b/d/", "", "me", Ec2Options(),
                    attempts=list(attempts))  # fmt: skip


def test_an_attempt_never_closed_ends_as_failed():
    open_attempt = AttemptRecord(1, "i-1", "g5.xlarge", False, "subnet-1", "us-east-1a", 100.0)
    state = _state(open_attempt)
    state.done = True  # undo_launch: the launch failed after the attempt was recorded
    status = lifecycle.final(state)
    assert status.state == "failed"
    assert status.reason and status.started_at == 100.0


def test_no_launched_attempt_is_a_data_error():
    with pytest.raises(DataError, match="no launched attempt"):
        _state().launched()
