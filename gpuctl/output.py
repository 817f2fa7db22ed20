"""What gpuctl prints: aligned tables, JSON, YAML, and the readable pages of a job, a quote, costs
and quotas. Pure functions of the API's JSON.

`lang` ("en" or "zh", gpuctl.messages) says table headers, labels and fixed words in the reader's
language; values, states and the keys of JSON and YAML output stay as the API gives them. Columns are
aligned by their width on a terminal (a Chinese character takes two columns)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

from gpuctl.messages import say

FORMATS = ("table", "wide", "json", "yaml")


def cell(value: Any, lang: str = "en") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return say(lang, "yes" if value else "no")
    return " ".join(str(value).split())  # one line per row keeps the columns aligned


def width(text: str) -> int:
    """Columns `text` takes on a terminal: East Asian wide and full-width characters take two."""
    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, size: int, *, right: bool = False) -> str:
    fill = " " * max(0, size - width(text))
    return fill + text if right else text + fill


def headers_in(lang: str, names: Sequence[str], **values) -> list[str]:
    return [say(lang, name, **values) for name in names]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Collection[int] = (),
                 headers_shown: bool = True, lang: str = "en") -> str:
    """Columns padded to their widest cell, two spaces apart; `right` holds numeric columns. `headers`
    are shown as given (callers say them in the reader's language); `lang` says yes and no."""
    cells = ([list(headers)] if headers_shown else []) + [[cell(value, lang) for value in row] for row in rows]
    if not cells:
        return ""
    widths = [max(width(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [pad(text, size, right=i in right) for i, (text, size) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def to_yaml(data: Any) -> str:
    """Block YAML in the API's own key order; the API's JSON holds only YAML-safe types."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False).rstrip("\n")


def format_time(value: str | None) -> str:
    """An API timestamp as `YYYY-MM-DD HH:MM:SS` in UTC."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def money(amount: Any, currency: str | None) -> str | None:
    if amount is None or amount == "":
        return None
    return f"{amount} {currency}".rstrip() if currency else str(amount)


# --------------------------------------------------------------------------- jobs


def pending_reason(job: Mapping[str, Any]) -> str:
    """Why a job waits, in the language gpuctl asked the server for (the recorded English as a fallback)."""
    return job.get("pending_reason_text") or job.get("pending_reason") or ""


def job_cost(job: Mapping[str, Any], lang: str = "en") -> str | None:
    """The final cost once a job ended, what it has cost so far while it runs, else None."""
    currency = job.get("currency") or (job.get("quote") or {}).get("currency")
    if job.get("final_cost") not in (None, ""):
        return say(lang, "{cost} (final)", cost=money(job["final_cost"], currency))
    if job.get("cost_so_far") not in (None, ""):
        return say(lang, "{cost} so far", cost=money(job["cost_so_far"], currency))
    return None


def format_jobs(jobs: Sequence[Mapping[str, Any]], *, wide: bool = False, headers_shown: bool = True,
                lang: str = "en") -> str:
    headers = ["ID", "NAME", "WORKSPACE", "QUEUE", "STATE", "PRIORITY", "REPLICAS", "CREATED (UTC)"]
    if wide:
        headers += ["TYPE", "PREEMPTIBLE", "NODES", "OPTION", "STARTED (UTC)", "FINISHED (UTC)", "COST"]
    headers.append("REASON")
    headers = headers_in(lang, headers)
    rows = []
    for job in jobs:
        replicas = job.get("replicas") or ()
        row = [job["id"], job["name"], job["workspace"], job["queue"], job["state"], job.get("priority"),
               len(replicas), format_time(job.get("created"))]
        if wide:
            nodes = sorted({r["node"] for r in replicas if r.get("node")})
            quote = job.get("quote") if isinstance(job.get("quote"), Mapping) else {}
            # a running job's cost so far, else its final cost
            spent = job.get("final_cost") if job.get("final_cost") is not None else job.get("cost_so_far")
            final = money(spent, job.get("currency"))
            row += [job.get("type"), job.get("preemptible"), ",".join(nodes) or None, quote.get("id"),
                    format_time(job.get("started")), format_time(job.get("finished")), final]
        row.append((pending_reason(job) or None) if job["state"] == "Pending" else None)
        rows.append(row)
    numbers = {0, 5, 6} | ({len(headers) - 2} if wide else set())
    return format_table(headers, rows, right=numbers, headers_shown=headers_shown, lang=lang)


def format_workspaces(workspaces: Sequence[Mapping[str, Any]], *, headers_shown: bool = True,
                      lang: str = "en") -> str:
    rows = [(w.get("slug"), w.get("name"), w.get("role"), format_time(w.get("created"))) for w in workspaces]
    return format_table(headers_in(lang, ("SLUG", "NAME", "ROLE", "CREATED (UTC)")), rows,
                        headers_shown=headers_shown, lang=lang)


JOB_LABELS = ("pending reason", "queue position", "expected start", "max runtime", "deadline", "end", "complete by",
              "latest start", "deadline phase", "unmeetable")


def format_job(job: Mapping[str, Any], events: Sequence[Mapping[str, Any]], *, lang: str = "en") -> str:
    """One job: its fields (with the cost, and where a pending job stands), replicas (node, GPUs, what
    each holds), frozen quote and events."""
    pending = job.get("state") == "Pending"
    fields: list[tuple[str, Any]] = [
        ("job", job["id"]),
        ("name", job.get("name")),
        ("workspace", job.get("workspace")),
        ("queue", job.get("queue")),
        ("state", job.get("state")),
    ]
    if pending:  # a reason left from before it ran would mislead
        fields.append(("pending reason", pending_reason(job) or None))
    if job.get("queue_position") is not None:
        fields.append(("queue position", job["queue_position"]))
    if job.get("expected_start") is not None or ("expected_start" in job and pending):
        fields.append(("expected start", _expected_start(job.get("expected_start"), lang)))
    reason = _last_reason(job, events)
    if reason:
        fields.append(("reason", reason))
    fields += [
        ("type", job.get("type")),
        ("priority", job.get("priority")),
        ("preemptible", job.get("preemptible")),
        ("reduce cost", job.get("reduce_cost")),
        ("expected", _duration(job.get("expected_duration_s"))),
        ("grace", _duration(job.get("termination_grace_s"))),
        ("checkpoint", _checkpoint(job.get("checkpoint"))),
        ("lost GPU-hours", job.get("lost_gpu_hours")),
        ("created", format_time(job.get("created"))),
        ("started", format_time(job.get("started"))),
        ("finished", format_time(job.get("finished"))),
        ("cost", job_cost(job, lang) or _estimate(job.get("quote"), lang)),
    ]
    fields += _chain_fields(job)
    if job.get("max_runtime_s"):
        fields.append(("max runtime", _duration(job["max_runtime_s"])))
    if job.get("deadline"):
        fields.append(("deadline", format_time(job["deadline"])))
    if job.get("complete_by"):  # work with a deadline: when it should be done, and where it stands
        fields += [("complete by", format_time(job["complete_by"])),
                   ("latest start", format_time(job.get("latest_start"))),
                   ("deadline phase", job.get("deadline_phase"))]
        if job.get("deadline_missed"):
            fields.append(("unmeetable", format_time(job["deadline_missed"])))
    if job.get("end_code"):
        fields.append(("end", f"{job['end_code']}: {job.get('end_reason_text') or ''}".rstrip(": ")))
    labels = {name: say(lang, name) for name in (*JOB_LABELS, *(name for name, _ in fields))}
    size = max(width(label) for label in labels.values())  # the same for every job
    lines = [f"{pad(labels[name], size)}  {cell(value, lang)}" for name, value in fields]

    lines += ["", say(lang, "replicas")]
    replicas = job.get("replicas") or []
    if replicas:
        rows = [(r.get("role"), r.get("index"), r.get("state"), r.get("node"),
                 ",".join(str(gpu) for gpu in r.get("gpus") or ()), r.get("slice_label") or _slice_text(r.get("slice")),
                 format_time(r.get("started")), format_time(r.get("ended")))
                for r in replicas]
        lines.append(format_table(headers_in(lang, ("ROLE", "INDEX", "STATE", "NODE", "GPUS", "HOLDS", "STARTED",
                                                    "ENDED")), rows, right={1}, lang=lang))
    else:
        lines.append(say(lang, "(none placed yet)" if pending else "(none)"))

    if "attempts" in job:   # the job detail's runs, each with how it ended
        lines += ["", say(lang, "attempts")]
        lines.append(format_attempts(job["attempts"], lang) if job["attempts"] else say(lang, "(none yet)"))

    lines += ["", say(lang, "quote")]
    lines.append(format_frozen_quote(job.get("quote"), lang))

    lines += ["", say(lang, "events")]
    if events:
        rows = [(format_time(e.get("time")), e.get("kind"), e.get("state"), e.get("reason")) for e in events]
        lines.append(format_table(headers_in(lang, ("TIME (UTC)", "KIND", "STATE", "REASON")), rows, lang=lang))
    else:
        lines.append(say(lang, "(none)"))
    return "\n".join(lines)


def _chain_fields(job: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """What it waits for, and an array's indices, counts by state and total cost (or which array it is of)."""
    out: list[tuple[str, Any]] = []
    after = job.get("after") or ()
    if after:
        out.append(("after", ", ".join(f"{e.get('name')} #{e.get('job')} ({e.get('condition')})" for e in after)))
    array = job.get("array")
    if isinstance(array, Mapping):
        out.append(("array", f"{array.get('indices')}, parallelism {array.get('parallelism')}"))
        counts = array.get("counts") or {}
        out.append(("indices", ", ".join(f"{n} {state}" for state, n in counts.items()) or None))
        if array.get("total_cost") is not None:
            out.append(("array cost", money(array.get("total_cost"), job.get("currency"))))
    if job.get("array_parent") is not None:
        out.append(("array", f"#{job['array_parent']} index {job.get('array_index')}"))
    return out


def format_attempts(attempts: Sequence[Mapping[str, Any]], lang: str = "en") -> str:
    rows = [(a.get("number"), format_time(a.get("start")), format_time(a.get("end")), a.get("class") or "-",
             a.get("exit_code"), a.get("node")) for a in attempts]
    return format_table(headers_in(lang, ("#", "STARTED", "ENDED", "CLASS", "EXIT CODE", "NODE")), rows,
                        right={0, 4}, lang=lang)


def _checkpoint(found: Any) -> str | None:
    """`/ckpt on runs every 30m (resumable)`; None without a checkpoint."""
    if not isinstance(found, Mapping) or not found.get("path"):
        return None
    text = str(found["path"])
    if found.get("volume"):
        text += f" on {found['volume']}"
    if found.get("every_s"):
        text += f" every {_duration(found['every_s'])}"
    return text + (" (resumable)" if found.get("resumable") else "")


def _expected_start(window: Any, lang: str = "en") -> str:
    if not isinstance(window, Mapping):
        return say(lang, "unknown")
    earliest, latest = window.get("earliest"), window.get("latest")
    if earliest and latest:
        if earliest == latest:
            return f"{format_time(earliest)} UTC"
        return say(lang, "between {earliest} and {latest} UTC", earliest=format_time(earliest),
                   latest=format_time(latest))
    if earliest:
        return say(lang, "not before {earliest} UTC", earliest=format_time(earliest))
    if latest:
        return say(lang, "by {latest} UTC", latest=format_time(latest))
    return say(lang, "unknown")


def _last_reason(job: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a job that is not pending is in its state: the reason of the event that put it there."""
    if job.get("state") == "Pending":
        return None
    for event in reversed(events):
        if event.get("state") == job.get("state") and event.get("reason"):
            return event.get("reason_text") or event["reason"]
    return None


def _estimate(quote: Any, lang: str = "en") -> str | None:
    if not isinstance(quote, Mapping) or quote.get("estimate_low") is None:
        return None
    low, high = quote["estimate_low"], quote.get("estimate_high")
    figure = low if high in (None, low) else f"{low}-{high}"
    return say(lang, "none yet (estimate {estimate})", estimate=money(figure, quote.get("currency")))


def format_frozen_quote(quote: Any, lang: str = "en") -> str:
    if not quote:
        return say(lang, "(none)")
    if not isinstance(quote, Mapping):
        return _compact(quote)
    option = quote.get("option") if isinstance(quote.get("option"), Mapping) else quote
    currency = option.get("currency") or quote.get("currency") or ""
    parts = [say(lang, "option {id}", id=option.get("id", "-"))]
    for key, label in (("price_per_hour", "price/h"), ("price_per_hour_offpeak", "off-peak price/h")):
        if option.get(key) is not None:
            parts.append(f"{say(lang, label)} {option[key]} {currency}".rstrip())
    if option.get("estimate_low") is not None:
        low, high = option["estimate_low"], option.get("estimate_high")
        figure = low if high in (None, low) else f"{low}-{high}"
        parts.append(f"{say(lang, 'estimate')} {figure} {currency}".rstrip())
    return say(lang, ", ").join(parts)


def _slice_text(value: Any) -> str | None:
    """What a replica holds, from an API without `slice_label`: `mig=3g.40gb`, not a JSON fragment."""
    if not value:
        return None
    if isinstance(value, Mapping):
        return " ".join(f"{key}={item}" for key, item in value.items())
    return _compact(value)


def _compact(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def _duration(seconds: Any) -> str | None:
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return None
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n) or "0s"


# --------------------------------------------------------------------------- quotes


def format_quote_options(answer: Mapping[str, Any], *, numbered: bool = False, lang: str = "en") -> str:
    """The options of a `POST /api/v1/quotes/` answer, cheapest marked with `*`; `numbered` puts
    each option's number (for `submit --option N`) first."""
    currency = answer.get("currency", "")
    rows = []
    for number, option in enumerate(answer.get("options", []), start=1):
        low, high = option.get("estimate_low"), option.get("estimate_high")
        row = [
            option["id"], option.get("sharing"), option.get("vendor"), option.get("gpu_model"),
            option.get("pool"), bool(option.get("spot")), option.get("when"),
            option.get("price_per_hour"), option.get("price_per_hour_offpeak"),
            low if low == high else f"{low}-{high}", "*" if option.get("cheapest") else "",
        ]
        rows.append([number, *row] if numbered else row)
    headers = headers_in(lang, ["ID", "SHARING", "VENDOR", "GPU MODEL", "POOL", "SPOT", "WHEN", "PRICE/H ({currency})",
                                "PRICE/H OFF-PEAK ({currency})", "ESTIMATE ({currency})", "CHEAPEST"], currency=currency)
    right = {7, 8, 9}
    if numbered:
        headers, right = ["#", *headers], {0} | {i + 1 for i in right}
    return format_table(headers, rows, right=right, lang=lang)


def format_quote(answer: Mapping[str, Any], spec_file: str, workspace: str, *, numbered: bool = False,
                 lang: str = "en") -> str:
    hours = answer.get("expected_duration_hours")
    lines = [say(lang, "quote for {spec} in {workspace}, {currency}", spec=spec_file, workspace=workspace,
                 currency=answer.get("currency", ""))
             + (say(lang, ", expected duration {hours} h", hours=hours) if hours is not None else "")]
    options = answer.get("options") or []
    if options:
        lines.append(format_quote_options(answer, numbered=numbered, lang=lang))
        cheapest = next(((n, o["id"]) for n, o in enumerate(options, start=1) if o.get("cheapest")), None)
        if cheapest and numbered:
            lines.append(say(lang, "cheapest: #{number} {id}  (gpuctl submit -f {spec} --option {number})",
                             number=cheapest[0], id=cheapest[1], spec=spec_file))
        elif cheapest:
            lines.append(say(lang, "cheapest: {id}  (gpuctl submit {spec} --option {id})", id=cheapest[1],
                             spec=spec_file))
        if schedule := answer.get("schedule"):  # a spec with `schedule:`: what a month of its runs costs
            lines.append(say(lang, "a month of runs ({runs}, {cron} in {zone}):", runs=schedule["runs_per_month"],
                             cron=schedule["cron"], zone=schedule["time_zone"]))
            lines.extend(f"  {option['id']}: {option.get('month_total')} {answer.get('currency', '')}".rstrip()
                         for option in options)
        tradeoffs = [(option["id"], option.get("tradeoffs")) for option in options if option.get("tradeoffs")]
        if tradeoffs:  # below the table: they are sentences, too long for a column
            lines += ["", say(lang, "trade-offs:")]
            lines.extend(f"  {option_id}: {'; '.join(items)}" for option_id, items in tradeoffs)
    else:
        lines.append(say(lang, "no option can run this spec"))
    lines.extend(say(lang, "not offered: {reason}", reason=reason) for reason in answer.get("unavailable") or ())
    return "\n".join(lines)


# --------------------------------------------------------------------------- quotas and costs

QUOTA_FIELDS = ("name", "deserved", "limit", "allocated", "fair_share", "pending")


def format_quota(entries: Sequence[Mapping[str, Any]], *, wide: bool = False, headers_shown: bool = True,
                 lang: str = "en") -> str:
    """One row per queue a workspace submits to; GPUs, and the count of pending jobs. A missing
    limit is shown as `-` (none)."""
    extra = sorted({key for e in entries for key in e if key not in (*QUOTA_FIELDS, "workspace")}) if wide else []
    headers = headers_in(lang, ["WORKSPACE", "QUEUE", "DESERVED", "LIMIT", "ALLOCATED", "FAIR SHARE", "PENDING"])
    headers += [key.upper().replace("_", " ") for key in extra]  # the API's own fields, as named
    rows = [[e.get("workspace"), e.get("name"), e.get("deserved"), e.get("limit"), e.get("allocated"),
             e.get("fair_share"), e.get("pending")] + [_compact(e.get(key)) for key in extra] for e in entries]
    return format_table(headers, rows, right={2, 3, 4, 5, 6}, headers_shown=headers_shown, lang=lang)


# group_by -> (the row's naming keys, their column titles)
COST_GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "job": (("job", "job_name"), ("JOB", "NAME")),
    "queue": (("queue",), ("QUEUE",)),
    "day": (("day",), ("DAY",)),
    "user": (("user",), ("USER",)),
    "gpu_model": (("gpu_model",), ("GPU MODEL",)),
    "pool": (("pool",), ("POOL",)),
    "workspace": (("workspace", "workspace_name"), ("WORKSPACE", "NAME")),
    "resource": (("resource",), ("RESOURCE",)),  # compute or storage
}
COST_COLUMNS = (("allocated_gpu_hours", "GPU-H"), ("used_gpu_hours", "USED GPU-H"), ("idle_gpu_hours", "IDLE GPU-H"))
WIDE_COST_COLUMNS = (("exclusive_gpu_hours", "EXCLUSIVE GPU-H"), ("cpu_core_hours", "CPU CORE-H"),
                     ("memory_gib_hours", "MEMORY GIB-H"), ("list_cost", "LIST COST"),
                     ("exclusive_cost", "EXCLUSIVE COST"))


def format_costs(answer: Mapping[str, Any], *, title: str, wide: bool = False, headers_shown: bool = True,
                 lang: str = "en") -> str:
    """A title line, one row per group and a TOTAL row; without headers, the group rows only."""
    keys, titles = COST_GROUPS.get(answer.get("group_by", ""), ((answer.get("group_by", ""),), ("GROUP",)))
    columns = COST_COLUMNS + (WIDE_COST_COLUMNS if wide else ())
    currency = answer.get("currency") or ""
    totals = answer.get("totals") or [{"currency": currency, "total": answer.get("total")}]
    # several currencies (workspaces billed in each): every amount names its own, one total each
    named = not currency and len(totals) > 1

    def cost(amount, code) -> str | None:
        return f"{amount} {code}" if named and amount not in (None, "") else amount

    headers = headers_in(lang, [*titles, *(label for _, label in columns), "COST" if named else "COST ({currency})"],
                         currency=currency)
    rows = [[row.get(key) for key in keys] + [row.get(key) for key, _ in columns]
            + [cost(row.get("cost"), row.get("currency"))] for row in answer.get("rows", [])]
    numbers = set(range(len(keys), len(headers)))
    if not headers_shown:
        return format_table(headers, rows, right=numbers, headers_shown=False, lang=lang)
    total_rows = [[say(lang, "TOTAL")] + [""] * (len(headers) - 2) + [cost(t.get("total"), t.get("currency"))]
                  for t in (totals if named else totals[:1])]
    as_of = (say(lang, ", as of {time} UTC", time=format_time(answer["as_of"])) if answer.get("as_of")
             else say(lang, ", no usage yet"))
    table = format_table(headers, [*rows, *total_rows], right=numbers, lang=lang)
    return f"{title}{as_of}\n{table}"
