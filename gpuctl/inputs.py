"""What a command reads besides its flags: a spec file (or standard input), and the workspace it acts in."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from gpuctl.api import Api
from gpuctl.errors import EXIT_SPEC, CliError
from gpuctl.settings import ENV_PREFIX


def read_spec(path: str, stdin: TextIO) -> tuple[str, str]:
    """(the label used in error lines, the spec text); `-` is standard input."""
    if path == "-":
        return "<stdin>", stdin.read()
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise CliError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"cannot read {path}: a directory, not a spec file") from None
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return path, raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CliError(f"{path}: not UTF-8 text (byte {error.start})", EXIT_SPEC) from None


def my_workspaces(api: Api) -> list[str]:
    return [w["slug"] for w in api.get_all("/api/v1/workspaces/", not_found="the server has no workspaces API")]


def chosen_workspace(run) -> str:
    """The configured workspace, else the caller's only one."""
    if run.settings.workspace:
        return run.settings.workspace
    slugs = my_workspaces(run.api)
    if len(slugs) == 1:
        return slugs[0]
    if not slugs:
        raise CliError("you are a member of no workspace")
    raise CliError(f"choose a workspace with --workspace or {ENV_PREFIX}WORKSPACE (yours: {', '.join(slugs)})")
