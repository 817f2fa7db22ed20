"""How sizes, GPU shares and money read, for pages, exports, API texts and reason texts alike.

One place, so a size reads "80Gi" and CNY reads "¥19,705.15" wherever they are shown. Money follows
the reader's language (the active one unless given): the currency's symbol before the amount,
grouping and decimal marks of that language, two places; static/portal/formats.js writes the same
with the browser's Intl.NumberFormat (currencyDisplay "narrowSymbol"). Amounts are rounded for
display only; the ledger's Decimal is never changed. A replica's slice is worded by its sharing mode
(scheduling/sharing.py) with these numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django.utils import translation

from scheduling.core.units import MILLI_PER_GPU

# ----------------------------------------------------------------------------- words

# Texts written for records (a job's stored reason, the scheduler's logs) are English whatever the
# reader's language; inside `in_english` the catalogue's msgids are used as they are, with no
# lookup, which a cycle wording thousands of reasons can afford.
_ENGLISH: ContextVar[bool] = ContextVar("english", default=False)


def in_english(render: Callable[..., str], *args: Any) -> str:
    """`render(*args)` with the catalogue's words in English."""
    token = _ENGLISH.set(True)
    try:
        return render(*args)
    finally:
        _ENGLISH.reset(token)


def gettext(message: str) -> str:
    return message if _ENGLISH.get() else translation.gettext(message)


def pgettext(context: str, message: str) -> str:
    return message if _ENGLISH.get() else translation.pgettext(context, message)


def ngettext(singular: str, plural: str, number: int) -> str:
    if _ENGLISH.get():
        return singular if number == 1 else plural
    return translation.ngettext(singular, plural, number)


# ----------------------------------------------------------------------------- job states

# A job's state as people read it; the API and the YAML keep the English value (Running).
STATE_WORDS = {
    "Pending": translation.pgettext_lazy("job state", "Pending"),
    "Scheduled": translation.pgettext_lazy("job state", "Scheduled"),
    "Running": translation.pgettext_lazy("job state", "Running"),
    "Succeeded": translation.pgettext_lazy("job state", "Succeeded"),
    "Failed": translation.pgettext_lazy("job state", "Failed"),
    "Preempted": translation.pgettext_lazy("job state", "Preempted"),
    "Cancelled": translation.pgettext_lazy("job state", "Cancelled"),
    "Stopped": translation.pgettext_lazy("job state", "Stopped"),
    "Blocked": translation.pgettext_lazy("job state", "Blocked"),
}


def state_text(state: str) -> str:
    """A job's (or replica's) state in the reader's language: 'Running' -> '运行中'; another word as it is."""
    word = STATE_WORDS.get(state)
    return state if word is None or _ENGLISH.get() else str(word)


def state_words() -> dict[str, str]:
    """Every job state's word in the active language, for a page's script."""
    return {state: state_text(state) for state in STATE_WORDS}


# ----------------------------------------------------------------------------- durations


def duration(seconds: float) -> str:
    """How long, in the reader's language: '3 d 4 h', '2 h 05 min', '12 min', '40 s'."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return gettext("%(days)s d %(hours)s h") % {"days": days, "hours": hours}
    if hours:
        return gettext("%(hours)s h %(minutes)s min") % {"hours": hours, "minutes": f"{minutes:02d}"}
    if minutes:
        return gettext("%(minutes)s min") % {"minutes": minutes}
    return gettext("%(seconds)s s") % {"seconds": secs}


def age(seconds: float) -> str:
    """A rough age in one unit, in the reader's language: '45 s', '12 min', '3 h', '2 d'."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return gettext("%(seconds)s s") % {"seconds": seconds}
    if seconds < 2 * 3600:
        return gettext("%(minutes)s min") % {"minutes": seconds // 60}
    if seconds < 2 * 86400:
        return gettext("%(hours)s h") % {"hours": seconds // 3600}
    return gettext("%(days)s d") % {"days": seconds // 86400}


# ----------------------------------------------------------------------------- sizes

_KIB = 1024
SIZE_UNITS = (("Ti", _KIB**4), ("Gi", _KIB**3), ("Mi", _KIB**2), ("Ki", _KIB))


def size(n_bytes: int) -> str:
    """A size in its largest whole binary unit, as Kubernetes quantities write it:
    2**40 -> '1Ti', 80 * 2**30 -> '80Gi', 1536 * 2**20 -> '1536Mi', 512 -> '512'."""
    for unit, factor in SIZE_UNITS:
        if n_bytes and n_bytes % factor == 0:
            return f"{n_bytes // factor}{unit}"
    return str(n_bytes)


def memory(mib: int) -> str:
    """A size given in MiB: 81920 -> '80Gi', 1048576 -> '1Ti', 512 -> '512Mi', 0 -> '0Mi'."""
    return size(mib * _KIB**2) if mib else "0Mi"


# ----------------------------------------------------------------------------- GPUs


def gpus_number(milli: float) -> str:
    """GPUs in thousandths as a number: 1000 -> '1', 500 -> '0.5', 2500 -> '2.5'."""
    return f"{milli / MILLI_PER_GPU:.3f}".rstrip("0").rstrip(".")


def gpus(milli: float) -> str:
    """GPUs in thousandths with their word, in the active language: '0.5 GPU', '1 GPU', '2.5 GPUs'."""
    template = gettext("%(gpus)s GPUs") if milli > MILLI_PER_GPU else gettext("%(gpus)s GPU")
    return template % {"gpus": gpus_number(milli)}


# ----------------------------------------------------------------------------- money

# The narrow symbol of each currency the platform bills in (what Intl's "narrowSymbol" shows); a
# currency without one keeps its code after the amount.
SYMBOLS = {"CNY": "¥", "USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹", "KRW": "₩"}
# Per language: (grouping mark, decimal mark). Chinese groups by thousands as English does (CLDR).
MARKS = {"en": (",", "."), "zh-hans": (",", ".")}
RATE_PLACES = 4  # a price per hour: up to four places (Intl's maximumFractionDigits), as the rate tables keep


def rate(amount: Any, currency: str = "", language: str | None = None) -> str:
    """A price per hour, as money with up to RATE_PLACES places: '$0.424', '¥7.20', '$0.00'."""
    return money(amount, currency, language, most_places=RATE_PLACES)


def _marks(language: str | None) -> tuple[str, str]:
    code = (language or translation.get_language() or "en").lower()
    return MARKS.get(code) or MARKS.get(code.split("-")[0]) or MARKS["en"]


def money(amount: Any, currency: str = "", language: str | None = None, *, most_places: int = 2) -> str:
    """An amount for people in `language` (the active one by default): '¥19,705.15', '-$0.85',
    '€1,234.50', '1,234.50 CHF' for a currency without a symbol; '' for no amount. `most_places`
    above 2 keeps up to that many places for a price per hour ('$0.424'), never fewer than two."""
    if amount is None or amount == "":
        return ""
    try:
        value = Decimal(str(amount)).quantize(Decimal(1).scaleb(-most_places), rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError, TypeError):
        return ""
    group, point = _marks(language)
    whole, cents = f"{abs(value):,.{most_places}f}".split(".")
    cents = cents.rstrip("0").ljust(2, "0")
    digits = f"{whole.replace(',', group)}{point}{cents}"
    sign = "-" if value < 0 else ""
    code = (currency or "").upper()
    if symbol := SYMBOLS.get(code):
        return f"{sign}{symbol}{digits}"
    return f"{sign}{digits} {code}".rstrip()
