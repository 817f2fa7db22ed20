import pytest

from tests.billing.ledger.test_same_cents_everywhere import (
    month,  # noqa: F401 (the fixture: a month of awkward usage)
)


@pytest.fixture(autouse=True)
def utc(settings):
    settings.TIME_ZONE = "UTC"  # the month's figures are worked out in UTC
