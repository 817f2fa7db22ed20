"""`gpuctl schedule list|show|suspend|resume|trigger|rm`: my workspaces' schedules (in -w WORKSPACE, else in all
mine), over `/api/v1/schedules/`. A schedule is made by submitting a spec with a `schedule:` block: `gpuctl submit`
sends such a spec to `/api/v1/schedules/` (`submit_schedule`). Times are UTC, as every gpuctl time; `show` gives
the next runs in the schedule's own zone too."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from gpuctl.errors import EXIT_OK
from gpuctl.output import format_table, format_time, headers_in

SCHEDULES = "/api/v1/schedules/"


def has_schedule(text: str) -> bool:
    """Whether a spec's text has a top-level `schedule` block (it makes a schedule, not a job)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return False  # the server says what is wrong with it
    return isinstance(document, dict) and "schedule" in document


def _missing(schedule_id: int) -> str:
    return f"no such schedule: {schedule_id}"


def _in_zone(value: str, zone: str) -> str:
    try:
        return datetime.fromisoformat(value).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
    except (ValueError, ZoneInfoNotFoundError):
        return value


def _state(schedule: dict) -> str:
    return "Suspended" if schedule["suspended"] else "Active"


def _said(run, schedule: dict, action: str) -> None:
    if run.structured:
        run.emit(schedule)
        return
    next_run = format_time(schedule.get("next_fire_at")) if schedule.get("next_fire_at") else "-"
    run.print(
        run.say(
            "schedule {id} ({name}) in {workspace}: {action}; next run {next} UTC",
            id=schedule["id"],
            name=schedule["name"],
            workspace=schedule["workspace"],
            action=run.say(action),
            next=next_run,
        )
    )


def submit_schedule(run, body: dict[str, Any], label: str, missing: str) -> int:
    """`gpuctl submit` of a spec with `schedule:`: make the schedule (quoted as one run, the option frozen)."""
    schedule = run.api.call("POST", SCHEDULES, body=body, spec_file=label, not_found=missing)
    _said(run, schedule, "made")
    return EXIT_OK


def cmd_schedule_list(run) -> int:
    workspace = run.settings.workspace
    params = {"workspace": workspace} if workspace else {}
    schedules = run.api.get_all(
        SCHEDULES, params=params, not_found=run.say("no such workspace: {workspace}", workspace=workspace)
    )
    rows = [
        [
            s["id"],
            s["name"],
            s["workspace"],
            s["cron"],
            s["time_zone"],
            s["concurrency"],
            _state(s),
            format_time(s["next_fire_at"]) if s.get("next_fire_at") else None,
        ]
        for s in schedules
    ]
    none = (
        run.say("no schedules in {workspace}", workspace=workspace) if workspace else run.say("no schedules")
    )
    run.listing(
        schedules,
        rows,
        ["ID", "NAME", "WORKSPACE", "CRON", "TIME ZONE", "CONCURRENCY", "STATE", "NEXT RUN (UTC)"],
        right=(0,),
        empty=none,
    )
    return EXIT_OK


def cmd_schedule_show(run) -> int:
    schedule = run.api.call("GET", f"{SCHEDULES}{run.args.id}/", not_found=_missing(run.args.id))
    if run.structured:
        run.emit(schedule)
        return EXIT_OK
    zone = schedule["time_zone"]
    lines = [
        run.say(
            "schedule {id} ({name}) in {workspace}: {state}",
            id=schedule["id"],
            name=schedule["name"],
            workspace=schedule["workspace"],
            state=_state(schedule),
        ),
        run.say(
            "cron: {cron} in {zone}; concurrency {concurrency}; lists the last {keep} finished runs",
            cron=schedule["cron"],
            zone=zone,
            concurrency=schedule["concurrency"],
            keep=schedule["keep_last"],
        ),
    ]
    for at in schedule.get("next_fire_times") or []:
        lines.append(run.say("next run: {utc} UTC ({local})", utc=format_time(at), local=_in_zone(at, zone)))
    run.print("\n".join(lines))
    runs = [
        [r["id"], r["name"], r["state"], format_time(r["created"]), format_time(r.get("finished"))]
        for r in schedule.get("runs") or []
    ]
    if runs:
        run.print()
        run.print(
            format_table(
                headers_in(run.lang, ["JOB", "NAME", "STATE", "SUBMITTED", "FINISHED"]),
                runs,
                right=(0,),
                headers_shown=run.headers,
                lang=run.lang,
            )
        )
    firings = [
        [format_time(f["fire_time"]), f["outcome"], f.get("job"), f.get("detail") or None]
        for f in schedule.get("firings") or []
    ]
    if firings:
        run.print()
        run.print(
            format_table(
                headers_in(run.lang, ["FIRE TIME (UTC)", "OUTCOME", "JOB", "DETAIL"]),
                firings,
                headers_shown=run.headers,
                lang=run.lang,
            )
        )
    return EXIT_OK


def _action(verb: str, said: str) -> Callable[[Any], int]:
    def cmd(run) -> int:
        schedule = run.api.call("POST", f"{SCHEDULES}{run.args.id}/{verb}/", not_found=_missing(run.args.id))
        _said(run, schedule, said)
        return EXIT_OK

    return cmd


def cmd_schedule_trigger(run) -> int:
    job = run.api.call("POST", f"{SCHEDULES}{run.args.id}/trigger/", not_found=_missing(run.args.id))
    if run.structured:
        run.emit(job)
    else:
        run.print(
            run.say(
                "schedule {id}: run {job} ({name}) submitted to {workspace}, queue {queue}: {state}",
                id=run.args.id,
                job=job["id"],
                name=job["name"],
                workspace=job["workspace"],
                queue=job["queue"],
                state=job["state"],
            )
        )
    return EXIT_OK


def cmd_schedule_rm(run) -> int:
    run.api.call("DELETE", f"{SCHEDULES}{run.args.id}/", not_found=_missing(run.args.id))
    if not run.structured:
        run.print(run.say("schedule {id}: deleted; its runs stay jobs of the workspace", id=run.args.id))
    return EXIT_OK


def add_schedule_commands(
    commands, command: Callable[..., argparse.ArgumentParser], add_output: Callable[..., Any]
) -> None:
    """`schedule` with its actions, registered on gpuctl's command parser (`command` and `add_output` are the
    cli's own helpers)."""
    schedule = command(
        commands,
        "schedule",
        None,
        "list, show, suspend, resume, trigger, delete schedules (gpuctl submit makes one from a spec "
        "with schedule:)",
    )
    actions = schedule.add_subparsers(
        dest="schedule_command", required=True, metavar="ACTION", parser_class=commands._parser_class
    )
    listing = command(actions, "list", cmd_schedule_list, "my schedules (in -w WORKSPACE, else in all mine)")
    add_output(listing, headers=True)
    show = command(
        actions, "show", cmd_schedule_show, "one schedule: next runs, its runs and latest fire times"
    )
    show.add_argument("id", type=int, metavar="ID")
    add_output(show, headers=True)
    for verb, said, help_text in (
        ("suspend", "suspended", "no runs until resumed"),
        ("resume", "resumed", "run again from the next fire time (no catching up)"),
    ):
        action = command(actions, verb, _action(verb, said), help_text)
        action.add_argument("id", type=int, metavar="ID")
        add_output(action)
    trigger = command(
        actions,
        "trigger",
        cmd_schedule_trigger,
        "a run now (refused while one is unfinished and the concurrency is Forbid)",
    )
    trigger.add_argument("id", type=int, metavar="ID")
    add_output(trigger)
    remove = command(
        actions, "rm", cmd_schedule_rm, "delete a schedule (its runs stay jobs of the workspace)"
    )
    remove.add_argument("id", type=int, metavar="ID")
