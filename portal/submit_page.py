"""Reads for the Submit page: the examples made for a workspace, the job a clone starts from, the
image form's values for a spec, and the quote rows as the page shows them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext, gettext_lazy, ngettext, pgettext

from billing.api import DEFAULT_DURATION_S, Quote, quantize_money, quote_texts, states_duration
from portal.selectors import get_job_for_user
from portal.templatetags.money import MONTHS
from scheduling import kinds
from scheduling.api import formats, image_form_values, parse_job_spec, parse_job_spec_obj, workspace_examples
from scheduling.api import selectors as scheduling_selectors
from scheduling.kinds import RATES_PER_HOUR, RATES_PER_REPLICAS

EXAMPLE_LABELS = {"single": gettext_lazy("1 GPU"), "clean": gettext_lazy("Shared GPU, every field"),
                  "spare": gettext_lazy("Spare capacity"), "seed": gettext_lazy("Task form (seed)")}


def examples_for(workspace) -> list[tuple[str, str, str]]:
    """(key, label, YAML) of the examples for `workspace`: its queues and the cluster's pools, each
    label in the reader's language."""
    queues = list(scheduling_selectors.queues_for_workspace(workspace))
    default = scheduling_selectors.default_queue(workspace)
    plain = [q for q in queues if not q.preemptible_only]
    queue = default if default is not None and not default.preemptible_only else (plain[0] if plain else None)
    spare = next((q for q in queues if q.preemptible_only), None)
    pools = [p for p in scheduling_selectors.cluster_info().pools if p.gpus_per_node > 0]
    examples = workspace_examples(queue=queue.name if queue else None, spare_queue=spare.name if spare else None,
                                  pools=pools)
    return [(key, str(EXAMPLE_LABELS.get(key, label)), text) for key, label, text in examples]


def clone_source(user, job_id: str):
    """The job a clone starts from: one of the user's workspaces' jobs, else Http404."""
    return get_job_for_user(user, job_id)


def hours_of(seconds: int) -> str:
    """Hours as a person writes them: 7200 -> "2", 36000 -> "10", 5400 -> "1.5"."""
    return format((Decimal(seconds) / 3600).quantize(Decimal("0.01")).normalize(), "f")


DEFAULT_HOURS = hours_of(DEFAULT_DURATION_S)


def image_form_for(spec: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    """The image form's values for a spec (SpecError when it does not parse), what of it the form
    cannot show, and the duration in hours when the spec states one."""
    parsed = parse_job_spec_obj(spec) if isinstance(spec, Mapping) else parse_job_spec(spec)
    values, hidden = image_form_values(parsed)
    stated = hours_of(parsed.expected_duration_s) if states_duration(spec) else None
    return {"form": values, "not_in_form": hidden, "duration_hours": stated}


MAX_TAGS = 3  # trade-off names a row shows; the rest are counted ("+2"), all are in its details


def _common_notes(quote: Quote) -> list:
    if len(quote.options) < 2:
        return []
    first, *others = quote.options
    return [n for n in first.tradeoff_notes if all(n.text in o.tradeoffs for o in others)]


def common_tradeoffs(quote: Quote) -> list[str]:
    """Trade-offs every option shares (said once above the table rather than on every row), in the
    reader's language."""
    return [quote_texts.tradeoff_text(n.code, n.params, n.text) for n in _common_notes(quote)]


def submit_texts() -> dict[str, Any]:
    """What the page's script writes beside each quote row, in the page's language (it fills in
    the %(name)s parts; prices come formatted, with their currency)."""
    return {RATES_PER_HOUR: gettext("%(price)s per hour"),
            RATES_PER_REPLICAS: gettext("%(low)s per hour at %(min)s replicas, %(high)s at %(max)s"),
            # a service that may scale to zero (or starts above one): what one replica costs too
            ONE_REPLICA: gettext("%(low)s per hour at %(min)s replicas, %(one)s at 1 replica, %(high)s at %(max)s"),
            FOR_HOURS: gettext("for %(hours)s h: %(low)s at %(min)s replicas, %(one)s at 1 replica, %(high)s at "
                               "%(max)s")}


ONE_REPLICA, FOR_HOURS = "per-replicas-one", "per-replicas-hours"


def kind_tabs() -> list[dict[str, Any]]:
    """The image form's tabs, one per kind that has one (its template, label and the hours a quote assumes)."""
    return [{"name": kind.name, "label": kind.tab_label, "template": kind.form_template, "form_id": kind.form_id,
             "quote_hours": hours_of(kind.quote_duration_s) if kind.quote_duration_s else ""}
            for kind in kinds.all() if kind.form_template]


def page_words() -> dict[str, str]:
    """The words the page's script writes, in the page's language: the form's data-<key>-text
    attributes (submit.js reads them, English when absent). %(name)s parts are filled in there."""
    status = "%(n)s option, assuming %(hours)s h, in %(currency)s."
    statuses = "%(n)s options, assuming %(hours)s h, in %(currency)s."
    return {
        "unreachable": gettext("the server could not be reached; try again"),
        "line": gettext("line %(line)s, col %(column)s"), "editor-label": gettext("Task YAML"),
        "quoting": gettext("Quoting…"), "fix-spec": gettext("Fix the spec to see a quote."),
        "fix-form": gettext("Fix the form to see a quote."), "quote-failed": gettext("the quote failed"),
        "empty": gettext("Type, upload or pick an example spec to see what each option costs."),
        "not-shown": gettext("The form does not show %(fields)s of this spec: editing the form rewrites the YAML "
                             "without them."),
        "too-large": gettext("%(name)s is %(size)s bytes; specs are limited to 64 KiB"),
        "option": gettext("Option"), "starts": gettext("Starts"), "total": gettext("Total"),
        "per-hour": gettext("Per hour"), "per-hour-title": gettext("The total over the hours it assumes"), "saving": gettext("Saving vs whole GPUs"),
        "tradeoffs": gettext("Trade-offs"), "spot": gettext("spot"), "off-peak": gettext("off-peak"),
        "by-deadline": gettext("by the deadline"),
        "cheapest": gettext("cheapest"), "earliest": gettext("earliest"), "now": gettext("now"),
        "queued": gettext("queued"), "up-to": gettext("up to %(high)s"),
        "month-of-runs": gettext("%(month)s a month (%(runs)s runs)"),
        "show-tradeoffs": gettext("Show the trade-offs in full"), "details": gettext("details"),
        "none": gettext("none"), "submit": gettext("Submit"), "every-option": gettext("Every option:"),
        "between": pgettext("between reasons", "; "), "assuming": gettext("assuming %(hours)s h"),
        "status-one": ngettext(status, statuses, 1), "status-other": ngettext(status, statuses, 2),
        "not-offered": gettext("Not offered (%(n)s)"),
        "months": gettext(MONTHS),
        "start": gettext("%(month)s %(day)s, %(time)s"),
    }


def rate_note(data: Mapping[str, Any], kind: str, currency: str) -> str:
    """A notebook's price per hour; a service's per hour at its fewest and its most replicas, and, when its
    fewest is not one (a service that scales to zero reads 0 per hour), at one replica, with what each
    costs for the hours quoted."""
    rates = kinds.get(kind).quote_rates
    texts = submit_texts()
    if rates == RATES_PER_HOUR:
        return texts[RATES_PER_HOUR] % {"price": formats.rate(data["price_per_hour"], currency)}
    if rates != RATES_PER_REPLICAS or not data["roles"]:
        return ""
    role = data["roles"][0]
    low, high = role["min_replicas"], role["max_replicas"]
    figures = {"low": formats.rate(data["price_per_hour"], currency), "min": low,
               "high": formats.rate(data["price_per_hour_max"], currency), "max": high}
    if low == 1 or high < 1:
        return texts[RATES_PER_REPLICAS] % figures
    # k replicas cost k times one (the same rates per replica), so one replica's hours are the most's over its count
    one_total = Decimal(data["estimate_high"]) / high
    per_hour = texts[ONE_REPLICA] % {**figures, "one": formats.rate(role["price_per_hour"], currency)}
    for_hours = texts[FOR_HOURS] % {"hours": data["duration_hours"], "min": low, "max": high,
                                    "low": formats.money(data["estimate_low"], currency),
                                    "one": formats.money(one_total, currency),
                                    "high": formats.money(data["estimate_high"], currency)}
    return f"{per_hour}; {for_hours}"


def per_hour(data: Mapping[str, Any]) -> Decimal | None:
    """The quote table's price per hour: the total shown over the hours it assumes, so that the two agree."""
    hours = Decimal(data["duration_hours"])
    return Decimal(data["total"]) / hours if hours > 0 else None


def quote_rows(quote: Quote, kind: str = kinds.DEFAULT) -> list[dict[str, Any]]:
    """The quote's options as the page's table shows them: the API's fields, the start as a time,
    the trade-offs of its own (those all options share left out), and for a notebook or a service
    its rates per hour."""
    common = {n.text for n in _common_notes(quote)}
    rows = []
    for option, data in zip(quote.options, quote.to_json()["options"], strict=True):
        start: datetime | None = option.expected_start
        own = [n for n in option.tradeoff_notes if n.text not in common]
        english_tags = dict(zip(option.tradeoffs, data["tradeoff_tags"], strict=True))
        tags = list(dict.fromkeys(quote_texts.tradeoff_tag(n.code, english_tags[n.text]) for n in own
                                  if n.code not in quote_texts.BADGED))
        rows.append({**data, "start_at": start, "pool_label": f"{option.gpu_model} · {option.pool}",
                     "has_saving": quantize_money(option.saving, option.currency) > 0,
                     "own_tradeoffs": [quote_texts.tradeoff_text(n.code, n.params, n.text) for n in own],
                     "tags": tags[:MAX_TAGS], "more_tags": len(tags[MAX_TAGS:]),
                     "rate_note": rate_note(data, kind, quote.currency),
                     "per_hour": formats.rate(per_hour(data), quote.currency)})
    return rows
