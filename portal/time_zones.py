"""The time zones a user may choose for their pages: the IANA zone database's, by name."""

import functools
import zoneinfo

from django.core.exceptions import ValidationError

# In the zone database but no place's time: "localtime" is whatever the server's clock says.
_NOT_CHOOSABLE = frozenset({"localtime", "Factory"})


@functools.cache
def choosable() -> tuple[str, ...]:
    """Every zone a user may choose, sorted; read from the zone database once per process."""
    return tuple(sorted(zoneinfo.available_timezones() - _NOT_CHOOSABLE))


@functools.cache
def _known() -> frozenset[str]:
    return frozenset(choosable())


def is_known(name: str) -> bool:
    return name in _known()


def validate(name: str) -> None:
    """For the model field (the admin's form): blank is the platform's zone, any other name must be known."""
    if name and not is_known(name):
        raise ValidationError(f"{name!r} is not a time zone, e.g. Asia/Shanghai")
