"""Money and dates for the reader's language: {{ amount|money:currency }} gives ¥1,234.50 or
$1,234.50 (symbol, thousands separators, two places), {{ day|long_date }} gives
2026年11月24日 in Chinese, 24 Nov 2026 in English, and {{ day|month_year }} 2026年11月 or November 2026. Amounts are rounded for display only; the
ledger's Decimal is never changed. {{ instant|day_time }} gives 11月25日 00:00 or Nov 25, 00:00 in the
reader's zone, from the words static/portal/submit.js writes the same with."""

from django import template
from django.utils import formats, timezone, translation
from django.utils.html import json_script
from django.utils.translation import gettext, gettext_noop

from scheduling.api import formats as shown

register = template.Library()

MONTHS = gettext_noop("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec")  # one word per month
DAYS = gettext_noop("Sun Mon Tue Wed Thu Fri Sat")  # one word per weekday, Sunday first (as plotly's locales)


@register.filter
def money(amount, currency=""):
    """{{ amount|money:currency }}: scheduling.formats.money in the reader's language."""
    return shown.money(amount, currency)


@register.filter
def rate(amount, currency=""):
    """{{ price|rate:currency }}: a price per hour with up to four places ($0.424), scheduling.formats.rate."""
    return shown.rate(amount, currency)


@register.filter
def memory(mib):
    """{{ mib|memory }}: 81920 -> 80Gi."""
    return "" if mib is None or mib == "" else shown.memory(int(mib))


@register.filter
def long_date(value):
    """A calendar day as the reader writes it: 2026年11月24日 / 24 Nov 2026."""
    if not value:
        return ""
    if (translation.get_language() or "").startswith("zh"):
        return f"{value.year}年{value.month}月{value.day}日"
    return formats.date_format(value, "j M Y")


@register.filter
def month_year(value):
    """A billing month as the reader writes it: 2026年11月 / November 2026."""
    if not value:
        return ""
    if (translation.get_language() or "").startswith("zh"):
        return f"{value.year}年{value.month}月"
    return formats.date_format(value, "F Y")


@register.filter
def day_time(value):
    """An instant's day and time in the reader's zone: 11月25日 00:00 / Nov 25, 00:00."""
    if not value:
        return ""
    local = timezone.localtime(value)
    months = gettext(MONTHS).split()
    if len(months) != 12:
        months = MONTHS.split()
    return gettext("%(month)s %(day)s, %(time)s") % {"month": months[local.month - 1], "day": local.day,
                                                     "time": f"{local:%H:%M}"}


def _words(text: str, count: int) -> list[str]:
    words = gettext(text).split()
    return words if len(words) == count else text.split()


@register.simple_tag
def chart_words():
    """The months and weekdays in the reader's language for the charts' date axes (static/portal/chart_words.js)."""
    return json_script({"language": translation.get_language() or "en", "months": _words(MONTHS, 12),
                        "days": _words(DAYS, 7)}, "chart-words")
