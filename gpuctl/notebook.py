"""`gpuctl notebook list|start|stop|open`: notebooks by name (in -w WORKSPACE, else in the one workspace of
the caller that has a live notebook of that name) or by id, over `/api/v1/notebooks/` and
`/api/v1/jobs/{id}/stop/`, `/start/`. `open` prints the URL the notebook opens at through the portal
(a browser signed in to the portal reaches it; the notebook's own token never leaves the server)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from gpuctl.errors import EXIT_OK, CliError
from gpuctl.kinds import handled_by
from gpuctl.output import format_table, headers_in

COMMAND = "notebook"  # gpuctl notebook ...
NOTEBOOKS = "/api/v1/notebooks/"
RUNNING = "Running"
STARTING = ("Pending", "Scheduled", "Preempted")


def _notebooks(run, workspace: str | None) -> list[dict]:
    params = {"workspace": workspace} if workspace else None
    return run.api.get_all(NOTEBOOKS, params=params,
                           not_found=f"no such workspace: {workspace}" if workspace else "the server has no notebooks API")


def find_notebook(run, ref: str) -> dict:
    """The live notebook `ref` names: an id, or a name in -w WORKSPACE (else in any of the caller's)."""
    workspace = run.settings.workspace
    mine = _notebooks(run, workspace)
    if ref.isdigit():
        found = [n for n in mine if str(n["id"]) == ref]
        if found:
            return found[0]
        job = run.api.call("GET", f"/api/v1/jobs/{ref}/", not_found=f"no such notebook: {ref}")
        if not handled_by(job, COMMAND):
            raise CliError(f"job {ref} ({job.get('name')}) is not a notebook")
        raise CliError(f"notebook {ref} ({job.get('name')}) in {job.get('workspace')} is {job.get('state')}")
    found = [n for n in mine if n["name"] == ref]
    if not found:
        where = f" in {workspace}" if workspace else ""
        raise CliError(f"no live notebook named {ref}{where} (gpuctl notebook list shows them)")
    if len(found) > 1:
        spaces = ", ".join(sorted(n["workspace"] for n in found))
        raise CliError(f"notebooks named {ref} are in several of your workspaces ({spaces}): choose one with -w")
    return found[0]


def _said(run, notebook: dict, action: str) -> None:
    if run.structured:
        run.emit(notebook)
    else:
        run.print(run.say("notebook {name} ({id}) in {workspace}: {action} -> {state}", name=notebook["name"],
                          id=notebook["id"], workspace=notebook["workspace"], action=run.say(action),
                          state=notebook["state"]))


def cmd_notebook_list(run) -> int:
    notebooks = _notebooks(run, run.settings.workspace)
    if run.structured:
        run.emit(notebooks)
        return EXIT_OK
    if not notebooks:
        run.note(run.say("no notebooks"))
        return EXIT_OK
    rows = [[str(n["id"]), n["name"], n["workspace"], n["state"], n["slice"],
             "-" if n["idle_s"] is None else run.say("{minutes} min", minutes=n["idle_s"] // 60),
             "-" if n["cost_so_far"] is None else f"{n['cost_so_far']} {n['currency']}", n["url"]]
            for n in notebooks]
    run.print(format_table(headers_in(run.lang, ["ID", "NAME", "WORKSPACE", "STATE", "SLICE", "IDLE", "COST", "URL"]),
                           rows, headers_shown=run.headers, lang=run.lang))
    return EXIT_OK


def cmd_notebook_stop(run) -> int:
    notebook = find_notebook(run, run.args.ref)
    job = run.api.call("POST", f"/api/v1/jobs/{notebook['id']}/stop/", not_found=f"no such notebook: {run.args.ref}")
    _said(run, {**notebook, "state": job["state"]}, "stopped, its GPU is free and its home kept")
    return EXIT_OK


def cmd_notebook_start(run) -> int:
    notebook = find_notebook(run, run.args.ref)
    job = run.api.call("POST", f"/api/v1/jobs/{notebook['id']}/start/", not_found=f"no such notebook: {run.args.ref}")
    _said(run, {**notebook, "state": job["state"]}, "started, it waits in its queue for a GPU")
    return EXIT_OK


def cmd_notebook_open(run) -> int:
    """The URL (stdout); a notebook that is starting is said on stderr, a stopped one is an error."""
    notebook = find_notebook(run, run.args.ref)
    state = notebook["state"]
    if state != RUNNING and state not in STARTING:
        raise CliError(f"notebook {notebook['name']} is {state}: gpuctl notebook start {notebook['name']} first")
    if run.structured:
        run.emit({"id": notebook["id"], "name": notebook["name"], "state": state, "url": notebook["url"]})
    else:
        run.print(notebook["url"])
    if state != RUNNING:
        run.note(run.say("notebook {name} is {state}: the URL answers once it runs", name=notebook["name"], state=state))
    return EXIT_OK


def add_notebook_commands(commands, command: Callable[..., argparse.ArgumentParser],
                          add_output: Callable[..., Any]) -> None:
    """`notebook` and its actions, registered on gpuctl's command parser (`command` and `add_output` are
    the cli's own helpers)."""
    notebook = command(commands, COMMAND, None, "list, start, stop or open my notebooks")
    actions = notebook.add_subparsers(dest="notebook_command", required=True, metavar="ACTION",
                                      parser_class=commands._parser_class)
    listing = command(actions, "list", cmd_notebook_list, "my notebooks not ended: state, slice, idle time, cost, URL")
    add_output(listing, headers=True)
    for name, handler, text in (("start", cmd_notebook_start, "start a stopped notebook (it queues for a GPU)"),
                                ("stop", cmd_notebook_stop, "stop a notebook: its GPU is freed, its home kept"),
                                ("open", cmd_notebook_open, "print the URL a notebook opens at, through the portal")):
        sub = command(actions, name, handler, text)
        sub.add_argument("ref", metavar="NAME_OR_ID", help="the notebook's name (in -w WORKSPACE) or its id")
        add_output(sub)
