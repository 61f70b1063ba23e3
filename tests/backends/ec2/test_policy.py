"""Pure pieces of the EC2 backend: relaunch policy, how an attempt ended, durations, IMDS
errors, and the euro cap turned into the dead-man switch."""

from __future__ import annotations

import base64
import re

import pytest

from finetune.backends.ec2.agent.imds import Imds, ImdsUnavailable
from finetune.backends.ec2.instances import relaunch as rl
from finetune.backends.ec2.instances.status import observe
from finetune.backends.ec2.options import Ec2Options
from finetune.errors import UsageError
from finetune.runs.charges import run_money
from finetune.units.durations import parse_duration

from .control import instances_of, launch, sync


def test_relaunch_candidates_in_order():
    got = rl.candidates("g5.xlarge", True, ("g6.xlarge", "g5.xlarge"), allow_on_demand=True)
    assert [c.describe() for c in got] == [
        "g5.xlarge (spot)",
        "g6.xlarge (spot)",
        "g5.xlarge (on-demand)",
    ]
    assert rl.candidates("g5.xlarge", False, (), allow_on_demand=True) == [
        rl.Candidate("g5.xlarge", False)
    ]


def test_interrupted_subnet_is_tried_first_then_the_others():
    subnets = [{"SubnetId": s} for s in ("a", "b", "c")]
    assert [s["SubnetId"] for s in rl.subnet_order(subnets, "b")] == ["b", "a", "c"]
    assert [s["SubnetId"] for s in rl.subnet_order(subnets, None)] == ["a", "b", "c"]


def test_relaunch_budget():
    assert rl.decide(0, 3, None).relaunch
    assert not rl.decide(3, 3, None).relaunch
    assert not rl.decide(0, 3, 0.0).relaunch and "--max-eur" in rl.decide(0, 3, -1).reason


def _inst(state: str, code: str = "", message: str = "") -> dict:
    return {"State": {"Name": state}, "StateReason": {"Code": code, "Message": message}}


def test_how_an_attempt_ended():
    assert observe({}, _inst("running"), False) == (None, None)
    assert observe({"state": "running"}, _inst("pending"), False) == (None, None)
    assert observe({"state": "completed"}, _inst("running"), False) == ("completed", None)
    assert observe({"state": "interrupted", "reason": "x"}, None, True)[0] == "stopped"
    spot = _inst("terminated", "Server.SpotInstanceTermination", "Spot reclaimed")
    assert observe({}, spot, False)[0] == "interrupted"
    state, reason = observe({}, _inst("terminated", "Client.InstanceInitiatedShutdown"), False)
    assert state == "failed" and "dead-man switch" in reason
    assert observe({}, None, True) == ("stopped", "stopped by the user")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("45m", 2700), ("2h", 7200), ("1h30m", 5400), ("2w", 14 * 86400)],
)
def test_durations(text, seconds):
    assert parse_duration(text, "--max-runtime") == seconds


@pytest.mark.parametrize("text", ["", "2x", "h2", "1h 2", "90", "0s", "-2h"])  # 90: no unit
def test_bad_durations_say_how_to_write_one(text):
    with pytest.raises(UsageError, match="2h"):
        parse_duration(text, "--max-runtime")


def test_imds_that_does_not_answer_is_reported_not_fatal():
    with pytest.raises(ImdsUnavailable):
        Imds("http://127.0.0.1:9", timeout=0.5).spot_action()


def test_max_eur_shortens_the_dead_man_switch(ec2_aws, tiny_dataset, tmp_path):
    """g5.xlarge on demand in us-east-1 is 1.006 USD/h (catalog snapshot), 0.9005 EUR/h at the
    ECB's 1.1172 of 2026-10-30: 0.5 EUR buys 33.3 minutes, so the instance ends itself then
    (plus the margin)."""
    opts = Ec2Options(max_eur=0.5, max_runtime=6 * 3600)
    run, backend, ledger = launch(tmp_path, tiny_dataset, opts, spot=False)
    script = base64.b64decode(ec2_aws.sent("RunInstances")[0]["UserData"]).decode()
    deadman = int(re.search(r"DEADMAN_SECONDS=(\d+)", script)[1])
    assert 33 * 60 + 900 <= deadman <= 34 * 60 + 900
    backend.stop(ledger.get(run.id))
    run, status, _ = sync(run, backend, ledger)
    assert status.state == "stopped" and run_money(run).eur > 0  # stopped by us: billed
    assert instances_of(run.id, ["running"]) == []


def test_max_eur_too_small_refuses_before_launching(ec2_aws, tiny_dataset, tmp_path):
    with pytest.raises(UsageError, match="under 10 minutes"):
        launch(tmp_path, tiny_dataset, Ec2Options(max_eur=0.05), spot=False)
    assert ec2_aws.sent("RunInstances") == []
