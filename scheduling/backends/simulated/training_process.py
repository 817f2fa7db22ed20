"""A simulated training replica's process: it says how it was wired, then runs for its duration.

Started by the simulated backend (`SimulatedBackend.start_training_process`) with exactly the replica's
environment, as a container gets it. It prints the names of its environment variables (never their
values) and each path mounted for it, writes one object `<S3_PREFIX><name>.txt` to the bucket its spec named
(when S3_BUCKET and the AWS_* variables are set: a job's real process talking to the store), then sleeps for `--seconds` and ends with the line COMPLETED and
exit code 0. The mounts come in SIM_MOUNTS, a JSON object {path in the replica: path on this machine};
the simulated cluster has no container, so the process looks at the path on this machine.

A resumable replica (`--checkpoint PATH`, a path in the replica: its checkpoint volume) counts its work in steps,
one per second of simulated time (`--clock-scale` simulated seconds per real second). It writes its step to
`PATH/<name>.json` every `--checkpoint-every` simulated seconds and when it gets SIGTERM (then it exits with
143), and when started again it resumes from the step written last, logging "resumed from step N".

With SIM_SSH (a JSON object: the variables its SSH server needs, scheduling/backends/ssh_endpoint.py),
it first starts that server as a child (`python -m scheduling.backends.ssh_endpoint`, which has the
platform's packages), waits for the port it prints and logs it ({"ssh": PORT}, which the backend reads back);
the variable is neither listed nor passed on to anything else. The child ends with this process.

Run as a script (`python -I -S training_process.py`): standard library only, no package imports, so it
starts in milliseconds and sees no project code.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

MOUNTS_VARIABLE = "SIM_MOUNTS"
SSH_VARIABLE = "SIM_SSH"
SSH_START_S = 60.0  # how long it waits for its SSH server's port (a loaded machine imports slowly)
COMPLETED = "training process completed"
# Failure simulation (demos and tests): SIM_EXIT_CODE is the code the process ends with, or a comma-separated
# list, one per placement of the replica ("1,1,0": fails twice, then completes); SIM_FAIL_AFTER is how long
# it runs before it fails, in simulated time ("10m", or seconds), else it fails at its end.
EXIT_CODE_VARIABLE = "SIM_EXIT_CODE"
FAIL_AFTER_VARIABLE = "SIM_FAIL_AFTER"
FAILED = "simulated failure: exit code"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def simulated_exit_code(env: dict, attempt: int) -> int:
    """The code this placement ends with (0: completes): the list's entry for `attempt`, its last past its end."""
    given = [part.strip() for part in str(env.get(EXIT_CODE_VARIABLE) or "").split(",") if part.strip()]
    if not given:
        return 1 if env.get(FAIL_AFTER_VARIABLE) else 0
    try:
        code = int(given[min(attempt, len(given) - 1)])
    except ValueError:
        return 1
    return code if 0 <= code <= 255 else 1


def simulated_fail_after(env: dict) -> float | None:
    """SIM_FAIL_AFTER in simulated seconds ("90", "30s", "10m", "1h"); None when absent or unreadable."""
    text = str(env.get(FAIL_AFTER_VARIABLE) or "").strip()
    if not text:
        return None
    number, unit = (text[:-1], text[-1]) if text[-1] in _UNITS else (text, "s")
    try:
        return max(0.0, float(number) * _UNITS[unit])
    except ValueError:
        return None


TERMINATED_EXIT = 128 + signal.SIGTERM


def checkpoint_file(folder: str | os.PathLike, name: str) -> Path:
    return Path(folder) / f"{name}.json"


def read_step(folder: str | os.PathLike, name: str) -> int:
    """The step the replica saved last in `folder` (a folder on this machine), 0 without one."""
    try:
        step = json.loads(checkpoint_file(folder, name).read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        return 0
    return step if isinstance(step, int) and step > 0 else 0


def write_step(folder: str | os.PathLike, name: str, step: int) -> None:
    """Written whole or not at all: a kill mid-write leaves the last checkpoint as it was."""
    target = checkpoint_file(folder, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step}))
    tmp.replace(target)


class Work:
    """A resumable replica's steps: from where it resumed, one per simulated second since it started."""

    def __init__(self, folder: str, name: str, clock_scale: float):
        self.folder, self.name, self.clock_scale = folder, name, clock_scale
        self.resumed = read_step(folder, name)
        self.began = time.monotonic()

    def step(self) -> int:
        return self.resumed + int((time.monotonic() - self.began) * self.clock_scale)

    def save(self) -> int:
        step = self.step()
        write_step(self.folder, self.name, step)
        return step


def environment_names() -> list[str]:
    """The names the process was started with: /proc/self/environ is the environment as exec gave it, before
    the interpreter adds any of its own (a coerced locale); elsewhere os.environ."""
    try:
        raw = open("/proc/self/environ", "rb").read()
    except OSError:
        return sorted(set(os.environ) - {SSH_VARIABLE})
    names = {entry.split(b"=", 1)[0].decode("utf-8", "replace") for entry in raw.split(b"\0") if entry}
    return sorted(names - {SSH_VARIABLE})


def start_ssh_server(wiring_text: str, say) -> subprocess.Popen | None:
    """The replica's SSH server as a child with the job's environment and the wiring; logs the port it listens
    on, or why it has none."""
    try:
        wiring = json.loads(wiring_text)
        assert isinstance(wiring, dict)
    except (ValueError, AssertionError):
        say.write("ssh: no SSH server: its wiring is unreadable\n")
        return None
    root = Path(__file__).resolve().parents[3]   # the project: the server imports its package
    env = {**os.environ, **{str(k): str(v) for k, v in wiring.items()}, "PYTHONPATH": str(root)}
    try:
        say.flush()   # its errors go to the same log (its stderr is this process's)
        child = subprocess.Popen([sys.executable, "-m", "scheduling.backends.ssh_endpoint"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    except OSError as error:
        say.write(f"ssh: no SSH server: {error}\n")
        return None
    ready, _, _ = select.select([child.stdout], [], [], SSH_START_S)
    line = child.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
    if not line.startswith('{"ssh"'):
        child.kill()
        say.write("ssh: no SSH server: it did not start\n")
        return None
    say.write(line + "\n")
    return child


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


def write_to_bucket(name: str) -> str:
    """PUT `<S3_PREFIX><name>.txt` into S3_BUCKET, signed with the replica's credentials; what the log says."""
    env = os.environ
    needed = ("S3_BUCKET", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    if not all(env.get(n) for n in needed):
        return "bucket: none"
    # the platform's signer, loaded by path: this script imports no package
    found = importlib.util.spec_from_file_location("sigv4", Path(__file__).resolve().parents[2] / "sigv4.py")
    sigv4 = importlib.util.module_from_spec(found)
    found.loader.exec_module(sigv4)
    key = env.get("S3_PREFIX", "") + f"{name}.txt"
    body = f"written by {name}\n".encode()
    url = sigv4.object_url(env["AWS_ENDPOINT_URL"], env["S3_BUCKET"], key)
    headers = sigv4.sign("PUT", url, access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"],
                         region=env.get("AWS_REGION") or "us-east-1", now=datetime.now(UTC),
                         payload_sha256=hashlib.sha256(body).hexdigest())
    headers.pop("Host")   # urllib sends the URL's own
    headers["Content-Type"] = "text/plain"   # else urllib says form data, which a server may parse away
    request = urllib.request.Request(url, data=body, method="PUT", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return f"bucket: wrote {key} ({answer.status})"
    except urllib.error.HTTPError as error:
        return f"bucket: writing {key} failed ({error.code})"
    except OSError as error:
        return f"bucket: writing {key} failed ({type(error).__name__})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True, help="how long the replica runs")
    parser.add_argument("--name", default="replica", help="the replica, as its log names it")
    parser.add_argument("--attempt", type=int, default=0, help="the replica's placement, from 0")
    parser.add_argument("--speedup", type=float, default=1.0, help="simulated seconds per real second")
    parser.add_argument("--checkpoint", default="", help="where it saves its step (a path in the replica)")
    parser.add_argument("--checkpoint-every", type=float, default=0.0, help="simulated seconds between checkpoints")
    args = parser.parse_args(argv)
    say = sys.stdout
    say.write(f"{args.name}: process {os.getpid()} started, runs {args.seconds:g} s\n")
    wiring = os.environ.pop(SSH_VARIABLE, None)
    ssh_server = start_ssh_server(wiring, say) if wiring else None
    say.write("environment: " + (", ".join(environment_names()) or "(empty)") + "\n")
    mapping = mounts()
    if not mapping:
        say.write("mounts: none\n")
    for path, source in sorted(mapping.items()):
        say.write(f"mount {path}: {describe(source)}\n")
    say.write(write_to_bucket(args.name) + "\n")
    say.flush()
    code = simulated_exit_code(os.environ, args.attempt)
    fail_after = simulated_fail_after(os.environ)
    runs = args.seconds if not code or fail_after is None else min(args.seconds, fail_after / max(args.speedup, 1e-9))
    folder = mapping.get(args.checkpoint.rstrip("/") or "/") if args.checkpoint else None
    if folder is None:
        time.sleep(max(0.0, runs))
    else:
        run_resumable(Work(folder, args.name, max(args.speedup, 1e-9)), runs, args.checkpoint_every, say)
    if ssh_server is not None:
        ssh_server.terminate()
    if code:
        say.write(f"{FAILED} {code}\n")
        say.flush()
        return code
    say.write(COMPLETED + "\n")
    say.flush()
    return 0


def run_resumable(work: Work, seconds: float, every_s: float, say) -> None:
    """Sleep out the run, saving every `every_s` simulated seconds; on SIGTERM save and exit."""
    if work.resumed:
        say.write(f"resumed from step {work.resumed}\n")
        say.flush()

    def terminated(signum, frame) -> None:
        step = work.save()
        say.write(f"SIGTERM: checkpoint saved at step {step}\n")
        say.flush()
        os._exit(TERMINATED_EXIT)

    signal.signal(signal.SIGTERM, terminated)
    ends = time.monotonic() + max(0.0, seconds)
    wall_every = every_s / work.clock_scale if every_s > 0 else None
    next_save = time.monotonic() + wall_every if wall_every else ends
    while (left := ends - time.monotonic()) > 0:
        time.sleep(min(left, max(0.0, next_save - time.monotonic())))
        if wall_every and time.monotonic() >= next_save:
            say.write(f"checkpoint saved at step {work.save()}\n")
            say.flush()
            next_save += wall_every
    work.save()


if __name__ == "__main__":
    sys.exit(main())
