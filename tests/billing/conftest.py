import pytest


@pytest.fixture(autouse=True)
def platform_time_zone_utc(settings):
    """The billing figures here are worked out by hand in UTC (day boundaries, off-peak windows),
    so they hold whatever platform time zone the suite runs with."""
    settings.TIME_ZONE = "UTC"
