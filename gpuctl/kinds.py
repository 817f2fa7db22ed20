"""The workload kinds this client has a command for, by the name the platform's API gives them (the
client imports nothing of the platform, so it keeps its own table)."""

from __future__ import annotations

from typing import Any

COMMAND_OF_KIND = {"notebook": "notebook", "inference": "serve"}
KIND_OF_COMMAND = {command: kind for kind, command in COMMAND_OF_KIND.items()}


def handled_by(job: dict[str, Any], command: str) -> bool:
    """Whether the job (as the API returns it) is of the kind that `gpuctl <command>` handles."""
    return COMMAND_OF_KIND.get(str(job.get("kind"))) == command
