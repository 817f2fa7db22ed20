"""The platform's time zone (settings.TIME_ZONE): billing periods, days and reports are cut in it."""

from zoneinfo import ZoneInfo

from django.conf import settings


def platform_tz() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)
