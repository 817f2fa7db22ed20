"""Map a process to the Kubernetes pod it runs in, through /proc/<pid>/cgroup."""

from __future__ import annotations

import re
from pathlib import Path

# Pod uids appear in cgroup paths as
#   cgroup v1 / cgroupfs driver:  /kubepods/besteffort/pod0f5e...-...-.../<container>
#   systemd driver (v1 or v2):     /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f5e_..._....slice/...
# The systemd driver writes the dashes of the uid as underscores. Static (mirror) pods use a
# 32-hex-digit uid without separators.
_POD_UID = re.compile(
    r"(?:^|[/-])pod("
    r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
    r"|[0-9a-f]{32}"
    r")(?=\.slice|/|$)"
)


def pod_uid_from_cgroup(text: str) -> str | None:
    """The pod uid named in the content of a /proc/<pid>/cgroup file, or None for a host process."""
    for line in text.splitlines():
        # Each line is "hierarchy-id:controllers:path"; the path may itself contain ':'.
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        match = _POD_UID.search(parts[2])
        if match:
            return match.group(1).replace("_", "-")
    return None


def pod_uid_for_pid(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    """The pod uid of a process; None when it is not in a pod or has already exited."""
    try:
        text = (Path(proc_root) / str(pid) / "cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return pod_uid_from_cgroup(text)
