"""SIGTERM/SIGINT become a stop request; a second one exits at once."""

from __future__ import annotations

import os
import signal

import pytest

from finetune.train.signals import StopRequest


def test_first_signal_sets_the_flag_second_exits():
    before = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert not stop
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop and stop.signal_name == "SIGTERM"
        with pytest.raises(SystemExit) as exc:
            os.kill(os.getpid(), signal.SIGINT)
        assert exc.value.code == 128 + signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
