"""The exchange-rate table: rates by pair and day, the ECB's CSV (console, command), cross rates through EUR,
and refusals (zero, negative, future, a stored rate changed) that store nothing."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from billing.exchange_rates import MissingRate, RateBook, RateError, add_rate, import_ecb_csv
from billing.models import ExchangeRate

pytestmark = pytest.mark.django_db

# the ECB's daily file ends each line with ", " (a trailing empty column)
ECB_DAILY = "Date, USD, JPY, BGN, CNY, GBP, \n2 March 2026, 1.0800, 162.10, 1.9558, 7.8000, 0.8500, \n"
ECB_HISTORY = """Date,USD,JPY,CNY,TRL,
2026-03-03,1.0900,N/A,7.8480,N/A,
2026-03-02,1.0800,162.10,7.8000,N/A,
"""


@pytest.fixture(autouse=True)
def today(clock):
    clock.now = datetime(2026, 3, 31, 12, tzinfo=UTC)


def test_the_daily_file_stores_eur_rates_of_the_currencies_billed_in():
    result = import_ecb_csv(ECB_DAILY)
    assert result.stored == 4 and result.days == [date(2026, 3, 2)] and result.skipped_currencies == ["BGN"]
    assert {(r.base, r.quote, r.rate) for r in ExchangeRate.objects.all()} == {
        ("EUR", "USD", Decimal("1.08")), ("EUR", "JPY", Decimal("162.1")), ("EUR", "CNY", Decimal("7.8")),
        ("EUR", "GBP", Decimal("0.85"))}


def test_the_history_file_skips_n_a_and_importing_again_changes_nothing():
    assert import_ecb_csv(ECB_HISTORY).stored == 5  # 2 days, JPY missing on the 3rd
    again = import_ecb_csv(ECB_HISTORY)
    assert (again.stored, again.unchanged) == (0, 5) and ExchangeRate.objects.count() == 5


def test_cross_rates_go_through_eur_and_a_direct_rate_wins():
    import_ecb_csv(ECB_HISTORY)
    book = RateBook("USD", [date(2026, 3, 2), date(2026, 3, 3)])
    assert book.rate("CNY", date(2026, 3, 2)) == (Decimal("1.08") / Decimal("7.8")).quantize(Decimal("1e-10"))
    assert book.rate("EUR", date(2026, 3, 3)) == Decimal("1.09")
    assert book.rate("USD", date(2026, 3, 3)) == 1
    add_rate(base="CNY", quote="USD", day=date(2026, 3, 3), rate="0.14")
    assert RateBook("USD", [date(2026, 3, 3)]).rate("CNY", date(2026, 3, 3)) == Decimal("0.14")
    assert RateBook("CNY", [date(2026, 3, 3)]).rate("USD", date(2026, 3, 3)) == (1 / Decimal("0.14")).quantize(
        Decimal("1e-10"))


def test_a_weekend_takes_the_friday_rate_and_beyond_the_lookback_the_error_names_day_and_pair(settings):
    add_rate(base="EUR", quote="USD", day=date(2026, 3, 6), rate="1.1")  # a Friday
    add_rate(base="EUR", quote="CNY", day=date(2026, 3, 6), rate="7.7")
    book = RateBook("USD", [date(2026, 3, 1), date(2026, 3, 30)])
    assert book.rate("CNY", date(2026, 3, 8)) == (Decimal("1.1") / Decimal("7.7")).quantize(Decimal("1e-10"))
    with pytest.raises(MissingRate) as missing:
        book.rate("CNY", date(2026, 3, 11))
    assert "CNY to USD" in str(missing.value) and "2026-03-11" in str(missing.value)
    assert missing.value.status == 422
    with pytest.raises(MissingRate, match="2026-03-05"):
        book.rate("CNY", date(2026, 3, 5))  # before any rate: never 1.0
    settings.BILLING_FX_LOOKBACK_DAYS = 0
    with pytest.raises(MissingRate, match="2026-03-07"):
        RateBook("USD", [date(2026, 3, 7)]).rate("CNY", date(2026, 3, 7))


@pytest.mark.parametrize(("rate", "day", "field"), [
    ("0", date(2026, 3, 2), "rate"), ("-1.2", date(2026, 3, 2), "rate"), ("abc", date(2026, 3, 2), "rate"),
    ("1.1", date(2026, 4, 1), "day"),
])
def test_a_bad_rate_is_refused_by_field(rate, day, field):
    with pytest.raises(RateError) as refused:
        add_rate(base="EUR", quote="USD", day=day, rate=rate)
    assert field in refused.value.errors and not ExchangeRate.objects.exists()


def test_a_stored_rate_never_changes():
    add_rate(base="EUR", quote="USD", day=date(2026, 3, 2), rate="1.08")
    with pytest.raises(RateError) as refused:
        add_rate(base="EUR", quote="USD", day=date(2026, 3, 2), rate="1.09")
    assert "day" in refused.value.errors
    with pytest.raises(RateError) as refused:
        import_ecb_csv("Date,USD,CNY\n2026-03-02,1.0900,7.8\n")
    assert list(refused.value.errors) == ["2026-03-02, USD"]
    assert ExchangeRate.objects.get().rate == Decimal("1.08")  # and CNY, right as it was, not stored either


@pytest.mark.parametrize(("text", "where"), [
    ("Date,USD,CNY\n2026-03-02,1.08,0\n", "line 2, CNY"),
    ("Date,USD,CNY\n2026-03-02,-1.08,7.8\n", "line 2, USD"),
    ("Date,USD,CNY\n2026-04-01,1.08,7.8\n", "line 2, Date"),
    ("Date,USD,CNY\n31/03/2026,1.08,7.8\n", "line 2, Date"),
    ("When,USD\n2026-03-02,1.08\n", "file"),
    ("Date,BGN\n2026-03-02,1.95\n", "file"),
])
def test_a_bad_file_stores_nothing_and_names_the_cell(text, where):
    good = "Date,USD,CNY\n2026-03-03,1.09,7.85\n"
    with pytest.raises(RateError) as refused:
        import_ecb_csv(text + good.split("\n", 1)[1])
    assert where in refused.value.errors and not ExchangeRate.objects.exists()


def test_the_command_imports_and_refuses(tmp_path):
    path = tmp_path / "eurofxref.csv"
    path.write_text(ECB_DAILY)
    call_command("import_exchange_rates", str(path))
    assert ExchangeRate.objects.filter(source="command").count() == 4
    path.write_text("Date,USD\n2 March 2026,1.0900\n")
    with pytest.raises(CommandError, match="2026-03-02, USD: already stored as 1.08"):
        call_command("import_exchange_rates", str(path))
    assert ExchangeRate.objects.get(quote="USD").rate == Decimal("1.08")
