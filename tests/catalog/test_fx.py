"""EUR reference rates: ECB XML parsing, weekend and holiday gaps, bundled data and cache."""

from datetime import date
from pathlib import Path

import pytest

from finetune.catalog import fx
from finetune.catalog._files import cache_dir
from finetune.errors import DataError

ECB = (Path(__file__).parent / "fixtures" / "ecb-hist.xml").read_bytes()


def test_parse_ecb_xml_reads_usd_per_day_only():
    rates = fx.parse_ecb_xml(ECB)
    assert rates[date(2025, 4, 22)] == 1.15
    assert rates[date(2025, 4, 10)] == 1.10
    assert len(rates) == 6  # JPY and the envelope are ignored


@pytest.mark.parametrize(
    ("day", "published", "rate"),
    [
        (date(2025, 4, 11), date(2025, 4, 11), 1.11),  # a working day: its own rate
        (date(2025, 4, 12), date(2025, 4, 11), 1.11),  # Saturday: Friday's
        (date(2025, 4, 13), date(2025, 4, 11), 1.11),  # Sunday: Friday's
        (date(2025, 4, 18), date(2025, 4, 17), 1.14),  # Good Friday (TARGET holiday)
        (date(2025, 4, 21), date(2025, 4, 17), 1.14),  # Easter Monday too
        (date(2025, 4, 22), date(2025, 4, 22), 1.15),
        (date(2030, 1, 1), date(2025, 4, 22), 1.15),  # after the last publication: the last
    ],
)
def test_rate_on_uses_the_latest_rate_on_or_before_the_day(day, published, rate):
    assert fx.rate_on(fx.parse_ecb_xml(ECB), day) == (published, rate)


def test_no_rate_before_the_first_publication_is_a_clear_error():
    with pytest.raises(DataError, match="earliest known: 2025-04-10") as err:
        fx.rate_on(fx.parse_ecb_xml(ECB), date(2025, 4, 9))
    assert "To fix: run `finetune prices refresh`" in str(err.value)


def test_bad_feeds_are_data_errors():
    with pytest.raises(DataError, match="not valid XML"):
        fx.parse_ecb_xml(b"<html>maintenance</html")
    with pytest.raises(DataError, match="no USD"):
        fx.parse_ecb_xml(b"<Envelope><Cube><Cube time='2025-01-02'/></Cube></Envelope>")


def test_eur_conversion_divides_by_the_usd_rate():
    rate = fx.Rate(1.25, date(2025, 1, 2), "test")
    assert rate.to_eur(10.0) == 8.0
    assert "1 EUR = 1.2500 USD on 2025-01-02" in rate.describe()


def test_bundled_snapshot_is_dated_and_sourced():
    rate = fx.eur_rate()
    assert rate.on == date(2025, 6, 30)
    assert rate.usd_per_eur == pytest.approx(1.172)
    assert "ECB" in rate.source and "bundled" in rate.source
    assert fx.eur_rate(date(2025, 1, 5)).on == date(2024, 12, 31)


def test_cached_rates_override_and_a_corrupt_cache_is_skipped_with_a_warning():
    path = cache_dir() / fx.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(fx.to_csv({date(2026, 3, 2): (1.2, "ECB test")}))
    assert fx.eur_rate() == fx.Rate(1.2, date(2026, 3, 2), "ECB test")
    path.write_text("Date,USDPerEUR,Source\nyesterday,lots,me\n")
    _, warnings = fx.load()
    assert warnings and "Ignoring the exchange-rate cache" in warnings[0]
    assert fx.eur_rate().on == date(2025, 6, 30)  # the bundled snapshot still answers
