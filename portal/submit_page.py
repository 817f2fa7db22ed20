"""Reads for the Submit page: the examples made for a workspace, the job a clone starts from, the
image form's values for a spec, and the quote rows as the page shows them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext

from billing.pricing import quantize_money
from billing.quotes import DEFAULT_DURATION_S, Quote, tradeoff_tag
from billing.services import states_duration
from portal.selectors import get_job_for_user
from scheduling import selectors as scheduling_selectors
from scheduling.spec import image_form_values, parse_job_spec, parse_job_spec_obj
from scheduling.spec.examples import workspace_examples


def examples_for(workspace) -> list[tuple[str, str, str]]:
    """(key, label, YAML) of the examples for `workspace`: its queues and the cluster's pools."""
    queues = list(scheduling_selectors.queues_for_workspace(workspace))
    default = scheduling_selectors.default_queue(workspace)
    plain = [q for q in queues if not q.preemptible_only]
    queue = default if default is not None and not default.preemptible_only else (plain[0] if plain else None)
    spare = next((q for q in queues if q.preemptible_only), None)
    pools = [p for p in scheduling_selectors.cluster_info().pools if p.gpus_per_node > 0]
    return workspace_examples(queue=queue.name if queue else None, spare_queue=spare.name if spare else None,
                              pools=pools)


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
BADGED = ("waits for off-peak", "reclaimable")  # the row's spot and off-peak badges say these


def common_tradeoffs(quote: Quote) -> list[str]:
    """Trade-offs every option shares (said once above the table rather than on every row)."""
    if len(quote.options) < 2:
        return []
    first, *others = quote.options
    return [t for t in first.tradeoffs if all(t in o.tradeoffs for o in others)]


def submit_texts() -> dict[str, str]:
    """What the page's script writes beside each quote row, in the page's language (it fills in
    the %(name)s parts)."""
    return {"notebook": gettext("%(price)s %(currency)s per hour"),
            "inference": gettext("%(low)s per hour at %(min)s replicas, %(high)s at %(max)s")}


def rate_note(data: Mapping[str, Any], kind: str, currency: str) -> str:
    """A notebook's price per hour; a service's per hour at its fewest and its most replicas."""
    if kind == "notebook":
        return submit_texts()["notebook"] % {"price": data["price_per_hour"], "currency": currency}
    if kind == "inference" and data["roles"]:
        role = data["roles"][0]
        return submit_texts()["inference"] % {"low": data["price_per_hour"], "min": role["min_replicas"],
                                              "high": data["price_per_hour_max"], "max": role["max_replicas"]}
    return ""


def quote_rows(quote: Quote, kind: str = "training") -> list[dict[str, Any]]:
    """The quote's options as the page's table shows them: the API's fields, the start as a time,
    the trade-offs of its own (those all options share left out), and for a notebook or a service
    its rates per hour."""
    common = set(common_tradeoffs(quote))
    rows = []
    for option, data in zip(quote.options, quote.to_json()["options"], strict=True):
        start: datetime | None = option.expected_start
        own = [t for t in option.tradeoffs if t not in common]
        tags = [tag for tag in dict.fromkeys(tradeoff_tag(t) for t in own) if tag not in BADGED]
        rows.append({**data, "start_at": start, "pool_label": f"{option.gpu_model} · {option.pool}",
                     "has_saving": quantize_money(option.saving, option.currency) > 0,
                     "own_tradeoffs": own, "tags": tags[:MAX_TAGS], "more_tags": len(tags[MAX_TAGS:]),
                     "rate_note": rate_note(data, kind, quote.currency)})
    return rows
