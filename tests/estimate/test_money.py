"""One test per billing rule of estimate.money, each against euros computed by hand here from
the stated prices and rate (never by calling our own arithmetic).

Rate: 1 EUR = 1.25 USD throughout, so EUR = USD x 0.8.
"""

from __future__ import annotations

from datetime import date

import pytest

from finetune.catalog.fx import Rate
from finetune.errors import DataError
from finetune.estimate import money
from finetune.estimate.money import EC2, FREE, SAGEMAKER, Charge

RATE = Rate(1.25, date(2025, 6, 30), "ECB (test)")


def ec2(seconds, instances=1, usd=3.06, market="on-demand", by_ec2=False) -> Charge:
    return Charge(EC2, "p3.2xlarge", instances, seconds, usd, "test price", "2025-05-31",
                  market, interrupted_by_ec2=by_ec2)  # fmt: skip


@pytest.mark.parametrize(
    ("running", "billed"),
    [(0, 0), (0.4, 60), (12.2, 60), (60, 60), (61.2, 62), (3600, 3600)],
)
def test_ec2_on_demand_is_billed_per_second_with_a_60_second_minimum(running, billed):
    m = money.euros([ec2(running)], RATE)
    assert m.billed_seconds == billed
    # p3.2xlarge at USD 3.06/h: 12.2 s still costs 60 s = 3.06 / 60 = USD 0.051 = EUR 0.0408
    assert m.eur == pytest.approx({0: 0, 60: 0.0408, 62: 0.04216, 3600: 2.448}[billed])


def test_every_host_of_a_multi_host_attempt_is_billed():
    # 2 x p3.8xlarge for one hour at USD 12.24/h: 2 x 12.24 = USD 24.48 = EUR 19.584
    m = money.euros([ec2(3600, instances=2, usd=12.24)], RATE)
    assert m.eur == pytest.approx(19.584)
    assert m.billed_seconds == 3600 and m.instance_seconds == 7200
    # a 30 s attempt on 3 hosts: each billed the 60 s minimum, 3 x 60 x 12.24 / 3600 = USD 0.612
    assert money.euros([ec2(30, instances=3, usd=12.24)], RATE).eur == pytest.approx(0.4896)


def test_spot_is_billed_at_the_price_recorded_for_the_attempt():
    # two spot attempts at the zone prices recorded at launch, USD 0.95/h then USD 1.10/h;
    # 1800 s and 2400 s: 0.95 / 2 + 1.10 x 2 / 3 = USD 1.2083333 = EUR 0.9666667
    m = money.euros([ec2(1800, usd=0.95, market="spot"), ec2(2400, usd=1.10, market="spot")], RATE)
    assert m.eur == pytest.approx(0.9666667, rel=1e-6)
    assert m.prices() == [
        "p3.2xlarge spot USD 0.95/h (test price, as of 2025-05-31)",
        "p3.2xlarge spot USD 1.1/h (test price, as of 2025-05-31)",
    ]


def test_interrupted_spot_follows_aws_billing_for_interrupted_spot_instances():
    # Linux, interrupted by EC2 in the first hour: no charge at all (not even the 60 s minimum)
    first_hour = money.euros([ec2(3599, usd=0.95, market="spot", by_ec2=True)], RATE)
    assert first_hour.eur == 0 and first_hour.billed_seconds == 0
    assert "no charge" in first_hour.lines[0].why
    # interrupted by EC2 after the first hour: the seconds used, 5400 x 0.95 / 3600 = USD 1.425
    later = money.euros([ec2(5400, usd=0.95, market="spot", by_ec2=True)], RATE)
    assert later.eur == pytest.approx(1.14)
    # stopped or terminated by the user (or our --max-runtime switch): the seconds used
    by_user = money.euros([ec2(1800, usd=0.95, market="spot")], RATE)
    assert by_user.eur == pytest.approx(0.38)  # 0.95 / 2 = USD 0.475


def test_sagemaker_bills_billable_seconds_times_instance_count():
    # ml.p3.8xlarge at USD 14.688/h, 2 instances, BillableTimeInSeconds 1200:
    # 2 x 1200 x 14.688 / 3600 = USD 9.792 = EUR 7.8336
    job = Charge(SAGEMAKER, "ml.p3.8xlarge", 2, 1200, 14.688, "test price")
    assert money.euros([job], RATE).eur == pytest.approx(7.8336)
    # a 12 s job is billed 12 s: no 60 s minimum on SageMaker's billable time
    short = Charge(SAGEMAKER, "ml.p3.8xlarge", 1, 12, 14.688, "test price")
    assert money.euros([short], RATE).eur == pytest.approx(0.039168)


def test_sagemaker_managed_spot_is_charged_on_billable_seconds():
    # managed spot: trained 3000 s, billed 1200 s, at the on-demand USD 3.825/h:
    # 1200 x 3.825 / 3600 = USD 1.275 = EUR 1.02; saving 1 - 1200 / 3000 = 60 %
    job = Charge(SAGEMAKER, "ml.p3.2xlarge", 1, 1200, 3.825, "test price", market="spot",
                 training_seconds=3000)  # fmt: skip
    m = money.euros([job], RATE)
    assert m.eur == pytest.approx(1.02)
    from finetune.estimate.cost import spot_savings

    assert spot_savings(m) == pytest.approx(0.6)


def test_local_runs_are_free_and_unknown_prices_stay_unknown():
    assert money.euros([Charge(FREE, "local-gpu", 1, 3600, None)], RATE).eur == 0
    assert money.euros([], RATE).eur == 0
    unknown = money.euros([ec2(600), ec2(600, usd=None)], RATE)
    assert unknown.eur is None and unknown.lines[0].eur == pytest.approx(0.408)


def test_money_carries_the_rate_and_refuses_nonsense():
    d = money.euros([ec2(3600)], RATE).to_dict()
    assert (d["usd_per_eur"], d["rate_date"], d["rate_source"]) == (
        1.25,
        "2025-06-30",
        "ECB (test)",
    )
    assert d["lines"][0]["billing"] == "per second, 60 s minimum"
    with pytest.raises(DataError, match="rate must be positive"):
        money.euros([ec2(60)], Rate(0, date(2025, 6, 30), "x"))
    with pytest.raises(DataError, match="cannot be negative"):
        money.euros([ec2(-1)], RATE)
    with pytest.raises(DataError, match="unknown billing rule"):
        money.euros([Charge("gcp", "a2", 1, 60, 1.0)], RATE)


def test_budget_helpers():
    # 2 hosts at USD 12.24/h: EUR 19.584 per hour; EUR 10 buys 10 / 19.584 h = 1838 s
    charge = ec2(0, instances=2, usd=12.24)
    assert money.eur_per_hour(charge, RATE) == pytest.approx(19.584)
    assert money.affordable_seconds(10, charge, RATE) == 1838
    assert money.affordable_seconds(10, ec2(0, usd=None), RATE) is None
