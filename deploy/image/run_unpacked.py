#!/usr/bin/env python3
"""Run an image that `umoci unpack` made into a bundle, where containers cannot run (no podman runtime):
the entrypoint as the image's user, in a chroot with its own mount and PID namespaces, the root filesystem
read-only as under the chart's readOnlyRootFilesystem, only the state directory and /tmp writable.
Needs root; the host's network.

    run_unpacked.py BUNDLE STATE_DIR [--env NAME=VALUE ...] [-- ARGS...]

The image's environment (its config), then --env, as `env -i` gives them; the state directory is mounted
at the image's VAR_DIR (or XDG_STATE_HOME).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys


def command(bundle: str, state_dir: str, env: list[str], args: list[str]) -> list[str]:
    process = json.load(open(os.path.join(bundle, "config.json")))["process"]
    rootfs = os.path.join(bundle, "rootfs")
    image_env = dict(item.split("=", 1) for item in process["env"])
    target = image_env.get("VAR_DIR") or image_env["XDG_STATE_HOME"]
    user = process["user"]
    q = shlex.quote
    script = " && ".join([
        f"mount --bind {q(rootfs)} {q(rootfs)}",
        f"mount -o remount,bind,ro {q(rootfs)}",
        f"mount --bind {q(state_dir)} {q(rootfs + target)}",
        f"mount -t tmpfs tmpfs {q(rootfs + '/tmp')}",
        f"mount -t proc proc {q(rootfs + '/proc')}",
        f"mount --rbind /dev {q(rootfs + '/dev')}",
        f"cd {q(rootfs + process.get('cwd', '/'))}",
        f'exec chroot --userspec={user["uid"]}:{user["gid"]} {q(rootfs)} /usr/bin/env -i "$@"',
    ])
    return ["unshare", "--mount", "--pid", "--fork", "sh", "-c", script, "sh",
            *process["env"], *env, *process["args"], *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("state_dir")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    ns = parser.parse_args(argv[:split])
    argv = command(ns.bundle, os.path.abspath(ns.state_dir), ns.env, argv[split + 1:])
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
