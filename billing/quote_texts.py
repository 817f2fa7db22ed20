"""The catalogue of a quote's trade-offs and the pools' refusals: the one place they are worded.

billing/quotes.py (no Django) gives each trade-off and each refusal a code and its figures only
(QuoteOption.tradeoff_notes, Quote.refusals, QuoteError.refusals; in the JSON `tradeoff_codes` and
`unavailable_codes`). Their English (`english_note`, `english_tag`, installed as the quote's renderer
at start-up) is what the API's `tradeoffs`, `tradeoff_tags` and `unavailable` say; pages and the
*_text fields render the code here in the reader's language, as scheduling/reasons.py does for
waiting reasons. A code this module does not know, or figures it cannot read, fall back to the
English text stored with the quote."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext_noop

from billing.quotes import QuoteError
from scheduling.api import MILLI_PER_GPU, formats, in_english, ngettext, pgettext, reason_text
from scheduling.api import gettext as _
from scheduling.api import memory as _memory

Figures = Mapping[str, Any]


def _gpus(milli: int) -> str:
    """As a quote counts GPUs (one GPU is singular, a share or none plural): 1000 -> '1 GPU', 500 -> '0.5 GPUs', 0 -> '0 GPUs'."""
    number = f"{milli / MILLI_PER_GPU:.2f}".rstrip("0").rstrip(".")
    return (_("%(gpus)s GPU") if milli == MILLI_PER_GPU else _("%(gpus)s GPUs")) % {"gpus": number}


def _wait(minutes: int) -> str:
    if minutes >= 60:
        return pgettext("a wait", "%(hours)sh%(minutes)sm") % {"hours": minutes // 60, "minutes": f"{minutes % 60:02d}"}
    return pgettext("a wait", "%(minutes)sm") % {"minutes": minutes}


def _offered(p: Figures) -> str:
    modes = ", ".join(p["modes"])
    return f"{modes} ({', '.join(p['profiles'])})" if p["profiles"] else modes


def _ask(ask: Figures) -> str:
    if ask["sharing"] == "fraction":
        if ask["gpu_mem_mib"] is not None:
            return _("%(share)s GPU with %(memory)s") % {"share": ask["share"], "memory": _memory(ask["gpu_mem_mib"])}
        return _("%(gpus)s GPU") % {"gpus": ask["share"]}
    if ask["sharing"] == "mig":
        return _("a MIG %(profile)s instance") % {"profile": ask["profile"]}
    if ask["sharing"] == "timeslice":
        return _("a time-slice slot")
    return ngettext("%(gpus)s whole GPU", "%(gpus)s whole GPUs", ask["gpus"]) % {"gpus": ask["gpus"]}


def _shared_gpu(p: Figures) -> str:
    if p["gpu_mem_mib"] is not None:
        return _("shares the GPU with other jobs (no hardware isolation); GPU memory capped at %(memory)s") % {
            "memory": _memory(p["gpu_mem_mib"])}
    return _("shares the GPU with other jobs (no hardware isolation); no GPU memory reserved")


def _expected_loss(p: Figures) -> str:
    figures = {"hours": p["gpu_hours"], "cost": formats.money(p["cost"], p["currency"])}
    if p["checkpoint_hint"]:
        return _("may be evicted: about %(hours)s GPU-hours (%(cost)s) lost at this queue's recent eviction rate; "
                 "a checkpoint every 30 min would cut it") % figures
    return _("may be evicted: about %(hours)s GPU-hours (%(cost)s) lost at this queue's recent eviction "
             "rate") % figures


# Code -> the trade-off in the reader's language (a role's name is put before it by tradeoff_text).
TRADEOFFS: dict[str, Callable[[Figures], str]] = {
    "time_sliced": lambda p: ngettext(
        "time-sliced: shares the GPU with up to %(others)s other job, compute not guaranteed, no GPU memory "
        "isolation",
        "time-sliced: shares the GPU with up to %(others)s other jobs, compute not guaranteed, no GPU memory "
        "isolation", p["others"]) % {"others": p["others"]},
    "shared_gpu": _shared_gpu,
    "pays_for_more": lambda p: _("pays for %(share)s GPU per replica, more than the %(asked)s GPU asked") % {
        "share": p["share"], "asked": p["asked"]},
    "amd_rocm": lambda p: _("AMD GPU: the image must support ROCm"),
    "waits_for_off_peak": lambda p: _("waits %(wait)s for the off-peak window at %(at)s (%(zone)s)") % {
        "wait": _wait(p["minutes"]), "at": p["at"], "zone": p["zone"]},
    "may_wait_for_capacity": lambda p: _("may wait for capacity: %(free)s free in %(pool)s now, the job needs "
                                         "%(needed)s to start") % {
        "free": _gpus(p["free_milli"]), "pool": p["pool"], "needed": _gpus(p["needed_milli"])},
    "no_room_now": lambda p: _("may wait for capacity: no node of %(pool)s has room for it now") % {"pool": p["pool"]},
    "queue_quota_full": lambda p: _("may queue: non-preemptible work must fit in queue %(queue)s's deserved quota "
                                    "of %(deserved)s (%(used)s in use, the job needs %(needed)s)") % {
        "queue": p["queue"], "deserved": _gpus(p["deserved_milli"]), "used": _gpus(p["used_milli"]),
        "needed": _gpus(p["needed_milli"])},
    "queue_limit_full": lambda p: _("may queue: queue %(queue)s is at its limit of %(limit)s (%(used)s in use, the "
                                    "job needs %(needed)s)") % {
        "queue": p["queue"], "limit": _gpus(p["limit_milli"]), "used": _gpus(p["used_milli"]),
        "needed": _gpus(p["needed_milli"])},
    "budget_blocks": lambda p: _("may queue: the workspace has spent its budget and its owner blocks new work at "
                                 "the limit"),
    "as_preemptible": lambda p: _("submitted as preemptible: starts now on what queue %(queue)s lends, and can be "
                                  "evicted when its quota is needed") % p,
    "spot": lambda p: _("spot capacity: can be reclaimed at any time"),
    "reduce_cost": lambda p: _("ReduceCost: no completion promise; runs only off-peak or on spot capacity"),
    "preemptible": lambda p: _("preemptible: can be evicted for higher-priority work"),
    "topology_one_domain": lambda p: (
        _("runs within one %(level)s of %(pool)s (the fastest links between its replicas); waits for one with "
          "room") if p["required"] else
        _("runs within one %(level)s of %(pool)s when one has room, else in the fewest")) % {
        "level": p["level"], "pool": p["pool"]},
    "expected_loss": lambda p: _expected_loss(p),
    "array_runs": lambda p: _("an array of %(runs)s indices: the totals are every index's, at most %(parallelism)s "
                              "run at a time") % p,
    "by_deadline": lambda p: _("by the deadline: runs in idle GPUs until its latest start, done by %(at)s (%(zone)s) "
                               "or billed at most this price") % {"at": p["at"], "zone": p["zone"]},
}

# Code -> a trade-off's short name for a table cell.
TAGS = {
    "time_sliced": gettext_noop("time-sliced"), "shared_gpu": gettext_noop("shared GPU"),
    "pays_for_more": gettext_noop("pays for more"), "amd_rocm": gettext_noop("ROCm image"),
    "waits_for_off_peak": gettext_noop("waits for off-peak"), "may_wait_for_capacity": gettext_noop("may queue"),
    "no_room_now": gettext_noop("may queue"), "spot": gettext_noop("reclaimable"),
    "queue_quota_full": gettext_noop("may queue"), "queue_limit_full": gettext_noop("may queue"),
    "budget_blocks": gettext_noop("may queue"), "as_preemptible": gettext_noop("as preemptible"),
    "reduce_cost": gettext_noop("no completion promise"), "preemptible": gettext_noop("preemptible"),
    "topology_one_domain": gettext_noop("one domain"), "array_runs": gettext_noop("array"),
    "expected_loss": gettext_noop("may lose work"), "by_deadline": gettext_noop("by the deadline"),
}
BADGED = frozenset({"waits_for_off_peak", "spot"})  # a row's off-peak and spot badges say these

# Code -> why a pool gives no option (after "pool: "), in the reader's language.
REFUSALS: dict[str, Callable[[Figures], str]] = {
    "pool_has_no_nodes": lambda p: _("the pool has no nodes yet"),
    "role_pool": lambda p: _("role '%(role)s' %(reason)s") % {
        "role": p["role"], "reason": reason_text(p["reason"]["code"], p["reason"]["params"])},
    "role_cluster": lambda p: _("role '%(role)s': %(reason)s") % {
        "role": p["role"], "reason": reason_text(p["reason"]["code"], p["reason"]["params"])},
    "not_priced": lambda p: _("the %(currency)s price table has no rate for %(vendor)s %(gpu_model)s") % p,
    "cannot_guarantee": lambda p: _("its %(offered)s cannot guarantee role '%(role)s' %(ask)s per replica") % {
        "offered": _offered(p), "role": p["role"], "ask": _ask(p["ask"])},
    "no_one_mode_fits": lambda p: _("no one sharing mode of its %(offered)s fits every role") % {
        "offered": _offered(p)},
    "pool_too_small": lambda p: _("the pool has %(total)s GPUs, the job needs %(needed)s to start at MinReplicas "
                                  "(%(min)s)") % {"total": p["total_gpus"], "needed": _gpus(p["needed_milli"]),
                                                  "min": p["min_replicas"]},
    "reduce_cost_no_window": lambda p: _("a ReduceCost job runs only off-peak or on spot capacity, and there is no "
                                         "off-peak window"),
    "topology_level_missing": lambda p: _("the job requires one %(level)s, the pool has no such level (levels: "
                                          "%(levels)s)") % {"level": p["level"],
                                                            "levels": ", ".join(p["levels"]) or _("none")},
}

# Code -> why quotes leave a pool out whatever the job (the console's pools, the capacity report): the
# refusals above that concern the pool alone, and these.
POOL_PROBLEMS: dict[str, Callable[[Figures], str]] = {
    "pool_not_priced": lambda p: _("no rate for %(vendor)s %(gpu_model)s in the %(currencies)s price table") % {
        "vendor": p["vendor"], "gpu_model": p["gpu_model"], "currencies": ", ".join(p["currencies"])},
}

_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def tradeoff_text(code: str, params: Figures, english: str = "") -> str:
    """A trade-off in the active language; `english` when the code or its figures are not known."""
    try:
        text = TRADEOFFS[code](params)
        if params.get("role"):
            return _("role '%(role)s': %(tradeoff)s") % {"role": params["role"], "tradeoff": text}
        return text
    except _UNREADABLE:
        return english


def tradeoff_tag(code: str, english: str = "") -> str:
    return _(TAGS[code]) if code in TAGS else english


def refusal_text(code: str, params: Figures, english: str = "") -> str:
    """Why a pool gives no option (without the pool's name) in the active language, else `english`."""
    try:
        return REFUSALS[code](params)
    except _UNREADABLE:
        return english


def pool_problem_text(code: str, params: Figures, english: str = "") -> str:
    """Why quotes leave a pool out (pool_has_no_nodes, pool_not_priced) in the active language."""
    try:
        return (POOL_PROBLEMS.get(code) or REFUSALS[code])(params)
    except _UNREADABLE:
        return english


def english_note(code: str, params: Figures) -> str:
    """A trade-off's or a refusal's English text, whatever the active language (Note.text)."""
    render = tradeoff_text if code in TRADEOFFS else refusal_text
    return in_english(render, code, params, code)


def english_tag(code: str) -> str:
    """A trade-off's short name in English (Note.tag)."""
    return in_english(tradeoff_tag, code, code)


def between() -> str:
    """What stands between trade-offs or refusals said in one line."""
    return pgettext("between reasons", "; ")


def _coded(codes: Sequence[Mapping[str, Any]] | None, texts: Sequence[str]) -> list[tuple[str, Figures, str]]:
    """(code, params, English) per text; a text without its code (a quote stored before codes) has none."""
    codes = list(codes or ())
    if len(codes) != len(texts):
        return [("", {}, text) for text in texts]
    return [(c.get("code", ""), c.get("params") or {}, text) for c, text in zip(codes, texts, strict=True)]


def option_tradeoffs(option: Mapping[str, Any]) -> list[str]:
    """An option's trade-offs (its JSON) in the active language, one per `tradeoffs` entry."""
    return [tradeoff_text(code, params, english)
            for code, params, english in _coded(option.get("tradeoff_codes"), option.get("tradeoffs") or [])]


def option_tags(option: Mapping[str, Any]) -> list[str]:
    """An option's trade-offs' short names in the active language, one per `tradeoffs` entry."""
    english = option.get("tradeoff_tags") or [""] * len(option.get("tradeoffs") or [])
    coded = _coded(option.get("tradeoff_codes"), option.get("tradeoffs") or [])
    return [tradeoff_tag(code, tag) for (code, _params, _text), tag in zip(coded, english, strict=True)]


def unavailable(quote: Mapping[str, Any]) -> list[str]:
    """The quote's "pool: why" lines in the active language, one per `unavailable` entry."""
    lines = quote.get("unavailable") or []
    coded = _coded(quote.get("unavailable_codes"), lines)
    return [f"{params['pool']}: {refusal_text(code, params, line)}" if code and params.get("pool") else line
            for code, params, line in coded]


def refusals_text(notes: Iterable[Any], *, pool: str | None = None) -> str:
    """Refusals (billing.quotes.Note) in one line in the active language; those of another pool than
    `pool` (when given) are named, the cluster's and `pool`'s own are not."""
    parts = []
    for note in notes:
        text = refusal_text(note.code, note.params, note.text)
        named = note.params.get("pool")
        parts.append(f"{named}: {text}" if named and named != pool else text)
    return between().join(parts)


def quote_error_text(error: Any) -> str:
    """A QuoteError's message in the active language (its English one when it carries no codes)."""
    if not getattr(error, "refusals", None):
        return "; ".join(m for ms in error.errors.values() for m in ms)
    return _("no pool can run this job: %(reasons)s") % {"reasons": refusals_text(error.refusals)}


def error_dicts(error: Any) -> list[dict[str, Any]]:
    """A refused quote's or submission's errors as the page lists them: a QuoteError's in the active
    language, others as they are."""
    if isinstance(error, QuoteError) and error.refusals:
        return [{"line": None, "column": None, "field": error.field, "message": quote_error_text(error)}]
    return error.to_dicts()


def localized_error(error: QuoteError) -> QuoteError:
    """The same refusal with its message in the active language (an API's problem detail)."""
    if not error.refusals:
        return error
    return QuoteError(quote_error_text(error), refusals=error.refusals)


def at_rate_text(at_rate: Mapping[str, Any] | None, currency: str, hours: Any = None) -> str:
    """An option's figures at a stated request rate, in the active language: its replicas, what they cost per
    hour and (given `hours`) for the hours quoted, and, with tokens per request, what 1M input and output
    tokens cost on it."""
    if not at_rate:
        return ""
    text = ngettext("%(replicas)s replica at %(rate)s requests/s", "%(replicas)s replicas at %(rate)s requests/s",
                    at_rate["replicas"]) % {"replicas": at_rate["replicas"], "rate": f"{at_rate['requests_per_second']:g}"}
    if at_rate.get("price_per_hour") is not None:
        price = Decimal(at_rate["price_per_hour"])
        text += "; " + _("%(price)s per hour") % {"price": formats.rate(price, currency)}
        if hours is not None and Decimal(str(hours)) > 0:
            text += "; " + _("about %(total)s for %(hours)s h") % {
                "total": formats.money(price * Decimal(str(hours)), currency), "hours": hours}
    if at_rate.get("cost_per_million_tokens") is not None:
        text += "; " + _("about %(input)s per 1M input tokens and %(output)s per 1M output tokens") % {
            "input": formats.rate(at_rate["cost_per_million_prompt_tokens"], currency),
            "output": formats.rate(at_rate["cost_per_million_completion_tokens"], currency)}
    return text


def localized(quote: dict[str, Any]) -> dict[str, Any]:
    """A quote's JSON with its words in the active language beside the English ones: per option
    `tradeoffs_text` and `tradeoff_tags_text`, and `unavailable_text`."""
    for option in quote.get("options", ()):
        option["tradeoffs_text"] = option_tradeoffs(option)
        option["tradeoff_tags_text"] = option_tags(option)
    quote["unavailable_text"] = unavailable(quote)
    if schedule := quote.get("schedule"):  # a spec with `schedule:`
        schedule["text"] = month_of_runs_text(schedule)
    return quote


def month_of_runs_text(schedule: Mapping[str, Any]) -> str:
    """What a scheduled spec's month says, in the active language."""
    return ngettext("%(runs)s run in 30 days (%(cron)s in %(zone)s): each option's month_total is its total once",
                    "%(runs)s runs in 30 days (%(cron)s in %(zone)s): each option's month_total is its total "
                    "%(runs)s times", schedule["runs_per_month"]) % {
        "runs": schedule["runs_per_month"], "cron": schedule["cron"], "zone": schedule["time_zone"]}
