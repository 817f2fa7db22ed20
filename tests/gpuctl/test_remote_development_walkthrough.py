"""Remote development end to end, as a new user does it: `gpuctl ssh-key add`, `gpuctl ssh-config`, then the real
OpenSSH `ssh` with that config block into the running notebook (`ssh vision-lab.lab`), `sim-smi`, `scp`, and a
real TensorBoard started in the notebook reached on the laptop with `gpuctl port-forward`. (The idle notebook
stopped once every signal is quiet is tests/billing/test_idle_any_ide.py.)

The test's gateway listens on a free port rather than 2222, so ssh is told the port on its command line (which
wins over the config's Port), and gpuctl's ssh is a wrapper that puts that port in."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.portal.conftest import running_notebook as notebook_running  # noqa: F401  (a fixture)
from tests.portal.ssh.conftest import (
    gateway,  # noqa: F401  (a fixture)
    ssh_options,
)

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
CHECKS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
          "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentityAgent=none"]
BOARD_START_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(fetch, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return fetch()
        except (httpx.TransportError, AssertionError):
            time.sleep(0.5)
    return fetch()


@pytest.mark.usefixtures("notebook_running")
def test_add_a_key_ssh_config_ssh_sim_smi_scp_and_forward_tensorboard(gpuctl, tokens, gateway, tmp_path):  # noqa: F811
    from scheduling.backends.simulated.backend import SimulatedBackend

    (tmp_path / ".ssh").mkdir()
    key = tmp_path / ".ssh" / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "me@laptop", "-f", str(key)], check=True)
    code, out, err = gpuctl(tokens["alice"], "ssh-key", "add")
    assert code == 0 and out.startswith("SSH key me@laptop added"), err

    code, block, err = gpuctl(tokens["alice"], "ssh-config", "-i", str(key))
    assert code == 0 and block.startswith("Host vision-lab.lab\n"), err
    config = tmp_path / ".ssh" / "config"
    config.write_text(block)

    def ssh(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(config), *CHECKS, "-p", str(gateway), *argv], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    smi = ssh("vision-lab.lab", "sim-smi")
    assert smi.returncode == 0 and "NVIDIA-SMI" in smi.stdout and "0.50 GPU" in smi.stdout, smi.stderr

    (tmp_path / "notes.txt").write_text("copied with scp\n")
    copied = subprocess.run(["scp", "-F", str(config), *CHECKS, "-P", str(gateway), str(tmp_path / "notes.txt"),
                             "vision-lab.lab:notes.txt"], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert copied.returncode == 0, copied.stderr
    assert (SimulatedBackend().home_of("vision-lab", "lab") / "notes.txt").read_text() == "copied with scp\n"

    board_port, local = free_port(), free_port()
    started = ssh("vision-lab.lab", f"mkdir -p tb; nohup {sys.executable} -m tensorboard.main --logdir tb "
                                    f"--host 127.0.0.1 --port {board_port} >tb.log 2>&1 </dev/null & echo pid=$!")
    assert started.returncode == 0, started.stderr
    board_pid = int(re.search(r"pid=(\d+)", started.stdout)[1])
    wrapper = tmp_path / "ssh-through-test-gateway"
    pid_file = tmp_path / "ssh.pid"
    options = " ".join(o for o in ssh_options(gateway, key) if o != "-p" and o != str(gateway))
    # gpuctl says `ssh -p 2222 ...`: the same, on the test gateway's port, with the test's client options
    wrapper.write_text(f'#!/bin/sh\necho $$ > {pid_file}\nshift 2\nexec ssh {options} -p {gateway} "$@"\n')
    wrapper.chmod(0o755)
    forwarding = threading.Thread(target=gpuctl, args=(tokens["alice"], "port-forward", "lab", f"{local}:{board_port}"),
                                  kwargs={"env": {"GPUCTL_SSH": str(wrapper)}}, daemon=True)
    forwarding.start()
    try:
        def board():
            answer = httpx.get(f"http://127.0.0.1:{local}/", timeout=5)
            assert answer.status_code == 200 and "tb-relative-root" in answer.text
            return answer

        # the real TensorBoard, from the laptop's side of the tunnel (it takes seconds to start)
        assert wait_for(board, BOARD_START_S).status_code == 200
    except Exception:
        print(ssh("vision-lab.lab", "cat tb.log").stdout)
        raise
    finally:
        subprocess.run(["kill", "-TERM", str(board_pid)], check=False)
        if pid_file.exists():
            subprocess.run(["kill", f"-{signal.SIGTERM.value}", pid_file.read_text().strip()], check=False)
        forwarding.join(15)

