"""A simulated training replica's process: it says how it was wired, then runs for its duration.

Started by the simulated backend (`SimulatedBackend.start_training_process`) with exactly the replica's
environment, as a container gets it. It prints the names of its environment variables (never their
values) and each path mounted for it, then sleeps for `--seconds` and ends with the line COMPLETED and
exit code 0. The mounts come in SIM_MOUNTS, a JSON object {path in the replica: path on this machine};
the simulated cluster has no container, so the process looks at the path on this machine.

Run as a script (`python -I -S training_process.py`): standard library only, no package imports, so it
starts in milliseconds and sees no project code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

MOUNTS_VARIABLE = "SIM_MOUNTS"
COMPLETED = "training process completed"


def environment_names() -> list[str]:
    """The names the process was started with: /proc/self/environ is the environment as exec gave it, before
    the interpreter adds any of its own (a coerced locale); elsewhere os.environ."""
    try:
        raw = open("/proc/self/environ", "rb").read()
    except OSError:
        return sorted(os.environ)
    return sorted({entry.split(b"=", 1)[0].decode("utf-8", "replace") for entry in raw.split(b"\0") if entry})


def mounts() -> dict[str, str]:
    try:
        given = json.loads(os.environ.get(MOUNTS_VARIABLE) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}


def describe(source: str) -> str:
    if os.path.isdir(source):
        return "directory"
    if os.path.isfile(source):
        return "file"
    return "missing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True, help="how long the replica runs")
    parser.add_argument("--name", default="replica", help="the replica, as its log names it")
    args = parser.parse_args(argv)
    say = sys.stdout
    say.write(f"{args.name}: process {os.getpid()} started, runs {args.seconds:g} s\n")
    say.write("environment: " + (", ".join(environment_names()) or "(empty)") + "\n")
    mapping = mounts()
    if not mapping:
        say.write("mounts: none\n")
    for path, source in sorted(mapping.items()):
        say.write(f"mount {path}: {describe(source)}\n")
    say.flush()
    time.sleep(max(0.0, args.seconds))
    say.write(COMPLETED + "\n")
    say.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
