"""Quantities in job specs: CPU, memory, durations, GPU fractions, MIG profiles.

Parsers raise ValueError with a message that completes "<field> <value> ..." (in the active
language); callers add the field name and position.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from django.utils.translation import gettext as _

from scheduling import formats
from scheduling.core.mig import MIG_PROFILES
from scheduling.core.units import mig_slices_milli

_CPU_RE = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)(m?)$")
_MEM_RE = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P)?$")
_MEM_UNITS = {
    None: 1,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
}
_MEM_MISTAKE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgtp])i?b$", re.IGNORECASE)
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
MIG_PROFILE_RE = re.compile(r"^([1-7])g\.(\d{1,3})gb$")

MAX_CPU_MILLI = 1024 * 1000
MAX_MEM_MIB = 16 * 1024 * 1024  # 16 TiB
MAX_DURATION_S = 90 * 86400
MIB = 1024 * 1024


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_cpu(value: object) -> int:
    """4 | 0.5 | "500m" | "2" -> milli-CPU."""
    if _is_number(value):
        text = repr(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(_("is not a CPU amount (e.g. 4, 0.5 or 500m)"))
    match = _CPU_RE.fullmatch(text)
    if not match:
        raise ValueError(_("is not a CPU amount (e.g. 4, 0.5 or 500m)"))
    amount = Decimal(match.group(1))
    milli = amount if match.group(2) else amount * 1000
    if milli != milli.to_integral_value():
        raise ValueError(_("is finer than 1m (one thousandth of a CPU)"))
    if milli <= 0:
        raise ValueError(_("must be more than 0"))
    if milli > MAX_CPU_MILLI:
        raise ValueError(_("is more than %(most)s CPUs") % {"most": MAX_CPU_MILLI // 1000})
    return int(milli)


def parse_memory(value: object) -> int:
    """ "16Gi" | "512Mi" | "10G" -> MiB, rounded up."""
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _MEM_RE.fullmatch(text):
        if _is_number(value) or (text and text.replace(".", "", 1).isdigit()):
            raise ValueError(_("has no unit; write e.g. 16Gi or 512Mi"))
        mistake = _MEM_MISTAKE_RE.fullmatch(text or "")
        if mistake:
            hint = f"{mistake.group(1)}{mistake.group(2).upper()}i"
            raise ValueError(_("uses an unknown unit; write %(hint)s (Ki, Mi, Gi, Ti)") % {"hint": hint})
        raise ValueError(_("is not a memory amount (e.g. 16Gi or 512Mi)"))
    match = _MEM_RE.fullmatch(text)
    assert match is not None
    number, unit = match.groups()
    if unit is None:
        raise ValueError(_("has no unit; write e.g. 16Gi or 512Mi"))
    mib = (Decimal(number) * _MEM_UNITS[unit] / MIB).to_integral_value(rounding=ROUND_CEILING)
    if mib <= 0:
        raise ValueError(_("must be more than 0"))
    if mib > MAX_MEM_MIB:
        raise ValueError(_("is more than 16Ti"))
    return int(mib)


def parse_duration(value: object) -> int:
    """ "30m" | "2h" | "1d" | "1h30m" | "1.5h" -> seconds."""
    if _is_number(value):
        raise ValueError(_("has no unit; write e.g. 30m, 2h or 1d"))
    if not isinstance(value, str):
        raise ValueError(_("is not a duration (e.g. 30m, 2h or 1d)"))
    text = value.strip().replace(" ", "")
    parts = _DURATION_PART_RE.findall(text)
    units = [u for _, u in parts]
    if not parts or "".join(n + u for n, u in parts) != text or len(set(units)) != len(units):
        if text.replace(".", "", 1).isdigit():
            raise ValueError(_("has no unit; write e.g. 30m, 2h or 1d"))
        raise ValueError(_("is not a duration (e.g. 30m, 2h, 1d or 1h30m)"))
    seconds = sum(Decimal(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds < 1:
        raise ValueError(_("must be at least 1s"))
    if seconds > MAX_DURATION_S:
        raise ValueError(_("is longer than 90d"))
    return int(seconds.to_integral_value(rounding=ROUND_CEILING))


def parse_gpu_amount(value: object) -> Decimal:
    """A GPU count or fraction as an exact Decimal (0.5 stays 0.5, not 0.5000000001)."""
    if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(_("is not a number of GPUs (e.g. 1, 2 or 0.5)"))
    try:
        amount = Decimal(repr(value))
    except InvalidOperation as exc:  # pragma: no cover - repr of a finite number always parses
        raise ValueError(_("is not a number of GPUs")) from exc
    if amount < 0:
        raise ValueError(_("must not be negative"))
    return amount


def mig_compute_milli(profile: str) -> int:
    """Compute share of a MIG instance: g of the GPU's slices, in milli-GPU."""
    match = MIG_PROFILE_RE.fullmatch(profile)
    assert match is not None
    return mig_slices_milli(int(match.group(1)))


def mig_memory_mib(profile: str) -> int:
    """What one instance of the profile can use (MiB): the MIG table's figure, a little under the name's
    (1g.18gb: 16384); the name's figure only for a profile the table does not know."""
    match = MIG_PROFILE_RE.fullmatch(profile)
    assert match is not None
    known = MIG_PROFILES.get(profile)
    return known[1] if known else int(match.group(2)) * 1024


def format_cpu(milli: int) -> int | str:
    return milli // 1000 if milli % 1000 == 0 else f"{milli}m"


def format_memory(mib: int) -> str:
    """A memory quantity as a spec writes it: 16Gi, 512Mi (scheduling.formats.memory)."""
    return formats.memory(mib)


def format_duration(seconds: int) -> str:
    parts = []
    for unit, size in _DURATION_UNITS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_gpu_milli(milli: int) -> int | float:
    return milli // 1000 if milli % 1000 == 0 else float(Decimal(milli) / 1000)
