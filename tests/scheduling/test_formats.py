"""One formatter for sizes, GPU shares and money: the same words on every page, export and API text."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import translation

from scheduling import formats


@pytest.mark.parametrize(("n_bytes", "shown"), [
    (0, "0"), (512, "512"), (1024, "1Ki"), (1536, "1536"), (3 * 1024, "3Ki"), (2**20, "1Mi"), (1536 * 2**20, "1536Mi"),
    (80 * 2**30, "80Gi"), (2**40, "1Ti"), (3 * 2**40, "3Ti"), (2**40 + 2**30, "1025Gi"),
])
def test_a_size_reads_in_its_largest_whole_unit(n_bytes, shown):
    assert formats.size(n_bytes) == shown


@pytest.mark.parametrize(("mib", "shown"), [
    (0, "0Mi"), (512, "512Mi"), (1024, "1Gi"), (81920, "80Gi"), (1024 * 1024, "1Ti"), (2 * 1024 * 1024, "2Ti"),
    (1536, "1536Mi"),
])
def test_memory_in_mib_reads_in_ki_mi_gi_ti(mib, shown):
    assert formats.memory(mib) == shown


def test_gpus_read_in_the_readers_language():
    assert [formats.gpus(m) for m in (500, 1000, 2500)] == ["0.5 GPU", "1 GPU", "2.5 GPUs"]
    with translation.override("zh-hans"):
        assert formats.gpus(2500) == "2.5 个 GPU"


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize(("amount", "currency", "shown"), [
    (Decimal("19705.15"), "CNY", "¥19,705.15"),
    (Decimal("4349.55"), "CNY", "¥4,349.55"),
    (Decimal("1234.505"), "USD", "$1,234.51"),
    (Decimal("-0.5"), "USD", "-$0.50"),
    (Decimal("1000000"), "EUR", "€1,000,000.00"),
    ("0.85", "usd", "$0.85"),
    (Decimal("1000000"), "CHF", "1,000,000.00 CHF"),
])
def test_money_has_its_symbol_and_grouping_in_english_and_chinese(language, amount, currency, shown):
    assert formats.money(amount, currency, language) == shown
    with translation.override(language):
        assert formats.money(amount, currency) == shown


def test_no_amount_reads_as_nothing():
    assert formats.money(None, "CNY") == formats.money("", "CNY") == formats.money("n/a", "CNY") == ""
