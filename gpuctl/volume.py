"""`gpuctl volume create|list|resize|rm|cp` and `gpuctl dataset snapshot|list|share|rm` in -w WORKSPACE (else
the caller's only workspace), over `/api/v1/workspaces/{slug}/volumes/` and `.../datasets/`. `cp` uploads one
local file to `VOLUME:/path`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuctl.completion import FILES
from gpuctl.errors import EXIT_OK, EXIT_SPEC, CliError
from gpuctl.inputs import chosen_workspace

ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany")
TARGET = re.compile(r"^(?P<volume>[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?):(?P<path>/.*)$")


def _volumes_url(workspace: str, name: str = "") -> str:
    return f"/api/v1/workspaces/{workspace}/volumes/" + (f"{name}/" if name else "")


def _missing(workspace: str, name: str = "") -> str:
    return f"no volume {name} in {workspace}" if name else f"no such workspace: {workspace}"


def size_arg(text: str) -> int:
    """`100`, `100G` or `100Gi`: GiB."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*(G|Gi|GiB)?\s*", text)
    if not match or int(match[1]) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in GiB such as 100 or 100Gi")
    return int(match[1])


def _said_volume(run, volume: dict, workspace: str, action: str) -> None:
    if run.structured:
        run.emit(volume)
    else:
        run.print(run.say("volume {name} in {workspace}: {action} ({size} GiB, {mode})", name=volume["name"],
                          workspace=workspace, action=run.say(action), size=volume["size_gib"],
                          mode=volume["access_mode"]))


def cmd_volume_create(run) -> int:
    args, workspace = run.args, chosen_workspace(run)
    body = {"name": args.name, "size_gib": args.size, "access_mode": args.access_mode}
    if args.storage_class:
        body["storage_class"] = args.storage_class
    volume = run.api.call("POST", _volumes_url(workspace), body=body, not_found=_missing(workspace))
    _said_volume(run, volume, workspace, "created")
    return EXIT_OK


def cmd_volume_list(run) -> int:
    workspace = chosen_workspace(run)
    answer = run.api.call("GET", _volumes_url(workspace), not_found=_missing(workspace))
    # HOME OF: the notebook whose home the volume is
    rows = [[v["name"], v["size_gib"], v["access_mode"], v["storage_class"], v.get("home_of") or None]
            for v in answer.get("volumes") or []]
    if not run.listing(answer, rows, ["NAME", "GIB", "ACCESS", "CLASS", "HOME OF"], right=(1,),
                       empty=run.say("no volumes in {workspace}", workspace=workspace)):
        return EXIT_OK
    quota = answer.get("quota_gib")
    if run.headers:
        run.note(run.say("{used} GiB used of {quota}", used=answer.get("used_gib"),
                         quota=f"{quota} GiB" if quota is not None else run.say("no limit")))
    return EXIT_OK


def cmd_volume_resize(run) -> int:
    workspace = chosen_workspace(run)
    volume = run.api.call("PATCH", _volumes_url(workspace, run.args.name), body={"size_gib": run.args.size},
                          not_found=_missing(workspace, run.args.name))
    _said_volume(run, volume, workspace, "resized")
    return EXIT_OK


def cmd_volume_rm(run) -> int:
    workspace = chosen_workspace(run)
    run.api.call("DELETE", _volumes_url(workspace, run.args.name), not_found=_missing(workspace, run.args.name))
    if not run.structured:
        run.print(run.say("volume {name} in {workspace}: deleted", name=run.args.name, workspace=workspace))
    return EXIT_OK


def cmd_volume_cp(run) -> int:
    """LOCAL_FILE VOLUME:/path (a path ending in / keeps the file's own name)."""
    source, target = Path(run.args.source), TARGET.fullmatch(run.args.target)
    if target is None:
        raise CliError(f"{run.args.target!r} is not VOLUME:/path, e.g. imagenet:/train/labels.csv", EXIT_SPEC)
    if not source.is_file():
        raise CliError(f"cannot read {source}: no such file")
    path = target["path"] + (source.name if target["path"].endswith("/") else "")
    workspace = chosen_workspace(run)
    with open(source, "rb") as data:
        answer = run.api.call("POST", _volumes_url(workspace, target["volume"]) + "files/", body={"path": path},
                              files={"file": (source.name, data)}, not_found=_missing(workspace, target["volume"]))
    if run.structured:
        run.emit(answer)
    else:
        run.print(run.say("{source} -> {volume}:{path} ({bytes} bytes)", source=source, volume=answer["volume"],
                          path=answer["path"], bytes=answer["bytes"]))
    return EXIT_OK


# --------------------------------------------------------------------------- datasets


def _datasets_url(workspace: str) -> str:
    return f"/api/v1/workspaces/{workspace}/datasets/"


def cmd_dataset_snapshot(run) -> int:
    workspace = chosen_workspace(run)
    body = {"volume": run.args.volume, **({"name": run.args.name} if run.args.name else {})}
    version = run.api.call("POST", _datasets_url(workspace), body=body, not_found=_missing(workspace))
    if run.structured:
        run.emit(version)
    else:
        run.print(run.say("{ref} in {workspace}: a read-only snapshot of volume {volume}", ref=version["ref"],
                          workspace=workspace, volume=version["source_volume"]))
    return EXIT_OK


def cmd_dataset_list(run) -> int:
    workspace = chosen_workspace(run)
    datasets = run.api.call("GET", _datasets_url(workspace), not_found=_missing(workspace))
    rows = [[("" if d["workspace"] == workspace else d["workspace"] + "/") + v["ref"], v["source_volume"],
             v["size_bytes"], ", ".join(d["shared_with"]) or "-"] for d in datasets for v in d["versions"]]
    run.listing(datasets, rows, ["DATASET", "FROM", "BYTES", "SHARED WITH"], right=(2,),
                empty=run.say("no datasets in {workspace}", workspace=workspace))
    return EXIT_OK


def cmd_dataset_share(run) -> int:
    workspace = chosen_workspace(run)
    run.api.call("POST", _datasets_url(workspace) + f"{run.args.name}/grants/", body={"workspace": run.args.to},
                 not_found=f"no dataset {run.args.name} in {workspace}")
    run.print(run.say("dataset {name} of {workspace}: shared read-only with {other}", name=run.args.name,
                      workspace=workspace, other=run.args.to))
    return EXIT_OK


def cmd_dataset_rm(run) -> int:
    match = re.fullmatch(r"([a-z0-9-]+)@v(\d+)", run.args.ref)
    if match is None:
        raise CliError(f"{run.args.ref!r} is not a dataset version such as imagenet@v3", EXIT_SPEC)
    workspace = chosen_workspace(run)
    run.api.call("DELETE", _datasets_url(workspace) + f"{match[1]}/versions/{match[2]}/",
                 not_found=f"no dataset version {run.args.ref} in {workspace}")
    run.print(run.say("{ref} in {workspace}: deleted", ref=run.args.ref, workspace=workspace))
    return EXIT_OK


def add_volume_commands(commands, command: Callable[..., argparse.ArgumentParser],
                        add_output: Callable[..., Any]) -> None:
    """`volume` and `dataset` with their actions, registered on gpuctl's command parser (`command` and
    `add_output` are the cli's own helpers)."""
    volume = command(commands, "volume", None, "create, list, resize, delete my workspace's volumes; copy a file in")
    actions = volume.add_subparsers(dest="volume_command", required=True, metavar="ACTION",
                                    parser_class=commands._parser_class)
    create = command(actions, "create", cmd_volume_create, "create a volume")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--size", type=size_arg, required=True, metavar="GIB", help="its size, GiB (e.g. 100Gi)")
    create.add_argument("--access-mode", choices=ACCESS_MODES, default="ReadWriteOnce")
    create.add_argument("--storage-class", metavar="CLASS", help="default: the platform's (standard)")
    add_output(create)
    listing = command(actions, "list", cmd_volume_list, "the workspace's volumes and its storage quota")
    add_output(listing, headers=True)
    resize = command(actions, "resize", cmd_volume_resize, "grow a volume (it never shrinks)")
    resize.add_argument("name", metavar="NAME")
    resize.add_argument("--size", type=size_arg, required=True, metavar="GIB", help="the new size, GiB")
    add_output(resize)
    remove = command(actions, "rm", cmd_volume_rm, "delete a volume (refused while a live job mounts it)")
    remove.add_argument("name", metavar="NAME")
    copy = command(actions, "cp", cmd_volume_cp, "upload a local file: gpuctl volume cp data.csv imagenet:/data.csv")
    copy.add_argument("source", metavar="LOCAL_FILE").complete = FILES
    copy.add_argument("target", metavar="VOLUME:/path")
    add_output(copy)

    dataset = command(commands, "dataset", None, "snapshot a volume into a read-only dataset version; share it")
    dactions = dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION",
                                      parser_class=commands._parser_class)
    snap = command(dactions, "snapshot", cmd_dataset_snapshot, "a new read-only version of a volume's files")
    snap.add_argument("volume", metavar="VOLUME")
    snap.add_argument("--name", metavar="DATASET", help="the dataset (default: the volume's name)")
    add_output(snap)
    dlist = command(dactions, "list", cmd_dataset_list, "the workspace's datasets and those shared with it")
    add_output(dlist, headers=True)
    share = command(dactions, "share", cmd_dataset_share, "let another workspace mount a dataset, read-only")
    share.add_argument("name", metavar="DATASET")
    share.add_argument("--to", required=True, metavar="WORKSPACE")
    drm = command(dactions, "rm", cmd_dataset_rm, "delete a dataset version (refused while a live job mounts it)")
    drm.add_argument("ref", metavar="NAME@vN")
