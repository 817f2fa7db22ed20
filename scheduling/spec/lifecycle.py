"""A job's life in its spec: `maxRuntime`, `retry` and `ttlAfterFinished` (read, and written back).

Every kind takes `maxRuntime` (a notebook or a service past it is stopped, a batch job fails); `retry` and
`ttlAfterFinished` are a batch job's.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.model import (
    DEFAULT_RETRY_BACKOFF_S,
    DEFAULT_RETRY_MAX_BACKOFF_S,
    RETRY_ON,
    JobSpec,
    RetrySpec,
)
from scheduling.spec.units import format_duration, parse_duration

RUNTIME_KEYS = ("maxRuntime",)
BATCH_KEYS = ("retry", "ttlAfterFinished")
RETRY_KEYS = ("limit", "backoff", "maxBackoff", "on", "onExitCodes")
MAX_RETRY_LIMIT = 100
MIN_MAX_RUNTIME_S = 60
MAX_BACKOFF_S = 24 * 3600
MAX_EXIT_CODES = 32


def read_max_runtime(r, doc: dict[str, Any]) -> Any:
    """`maxRuntime` in seconds; None when absent or wrong (its issue recorded)."""
    seconds = r.quantity(doc, (), "maxRuntime", parse_duration, None)
    if isinstance(seconds, int) and seconds < MIN_MAX_RUNTIME_S:
        r.error(
            ("maxRuntime",),
            _("maxRuntime (%(value)s) must be at least %(least)s")
            % {"value": format_duration(seconds), "least": format_duration(MIN_MAX_RUNTIME_S)},
        )
        return None
    return seconds


def read_batch_life(r, doc: dict[str, Any]) -> dict[str, Any]:
    """`maxRuntime`, `retry` and `ttlAfterFinished` as JobSpec's fields (a wrong one is None, its issue said)."""
    return {
        "max_runtime_s": read_max_runtime(r, doc),
        "retry": read_retry(r, doc),
        "ttl_after_finished_s": r.quantity(doc, (), "ttlAfterFinished", parse_duration, None),
    }


def read_retry(r, doc: dict[str, Any]) -> RetrySpec | None:
    raw = doc.get("retry")
    if raw is None:
        return None
    found = r.mapping(raw, ("retry",), _("limit, backoff, maxBackoff, on and onExitCodes, e.g. {limit: 3}"))
    if found is None:
        return None
    path = ("retry",)
    r.check_keys(found, path, RETRY_KEYS, where="retry")
    r.required(found, path, "limit")
    limit = r.integer(found, path, "limit", lo=0, hi=MAX_RETRY_LIMIT, default=None)
    backoff = r.quantity(found, path, "backoff", parse_duration, DEFAULT_RETRY_BACKOFF_S)
    most = r.quantity(
        found, path, "maxBackoff", parse_duration, max(DEFAULT_RETRY_MAX_BACKOFF_S, backoff or 0)
    )
    wrong = False
    for key, value in (("backoff", backoff), ("maxBackoff", most)):
        if isinstance(value, int) and value > MAX_BACKOFF_S:
            r.error(
                (*path, key),
                _("retry.%(key)s (%(value)s) must be at most %(most)s")
                % {"key": key, "value": format_duration(value), "most": format_duration(MAX_BACKOFF_S)},
            )
            wrong = True
    if not wrong and isinstance(backoff, int) and isinstance(most, int) and most < backoff:
        r.error(
            (*path, "maxBackoff"),
            _("retry.maxBackoff (%(most)s) is shorter than retry.backoff (%(backoff)s)")
            % {"most": format_duration(most), "backoff": format_duration(backoff)},
        )
        wrong = True
    on = _read_on(r, found, path)
    codes = _read_exit_codes(r, found, path)
    if wrong or None in (limit, backoff, most, on, codes):
        return None
    return RetrySpec(limit=limit, backoff_s=backoff, max_backoff_s=most, on=on, on_exit_codes=codes)


def _read_on(r, found: dict[str, Any], path) -> tuple[str, ...] | None:
    raw = found.get("on")
    if raw is None:
        return ("failed",)
    if not isinstance(raw, list) or not raw:
        r.error((*path, "on"), _("retry.on must be a list of %(choices)s") % {"choices": ", ".join(RETRY_ON)})
        return None
    for i, item in enumerate(raw):
        if item not in RETRY_ON:
            r.error(
                (*path, "on", i),
                _("retry.on: %(value)s is not one of %(choices)s")
                % {"value": item, "choices": " | ".join(RETRY_ON)},
            )
            return None
    return tuple(dict.fromkeys(raw))


def _read_exit_codes(r, found: dict[str, Any], path) -> tuple[int, ...] | None:
    raw = found.get("onExitCodes")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw or len(raw) > MAX_EXIT_CODES:
        r.error(
            (*path, "onExitCodes"),
            _("retry.onExitCodes must be a list of 1 to %(most)s exit codes") % {"most": MAX_EXIT_CODES},
        )
        return None
    for i, code in enumerate(raw):
        if isinstance(code, bool) or not isinstance(code, int) or not 1 <= code <= 255:
            r.error(
                (*path, "onExitCodes", i),
                _("retry.onExitCodes: %(value)s is not an exit code from 1 to 255") % {"value": code},
            )
            return None
    return tuple(sorted(set(raw)))


def retry_to_dict(retry: RetrySpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "limit": retry.limit,
        "backoff": format_duration(retry.backoff_s),
        "maxBackoff": format_duration(retry.max_backoff_s),
        "on": list(retry.on),
    }
    if retry.on_exit_codes:
        out["onExitCodes"] = list(retry.on_exit_codes)
    return out


def life_to_dict(spec: JobSpec) -> dict[str, Any]:
    """The clean-form fields of the spec's life, only those it has."""
    out: dict[str, Any] = {}
    if spec.max_runtime_s is not None:
        out["maxRuntime"] = format_duration(spec.max_runtime_s)
    if spec.retry is not None:
        out["retry"] = retry_to_dict(spec.retry)
    if spec.ttl_after_finished_s is not None:
        out["ttlAfterFinished"] = format_duration(spec.ttl_after_finished_s)
    return out
