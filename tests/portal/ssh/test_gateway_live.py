"""The real OpenSSH client through the gateway to a running notebook on the simulated cluster: a shell and
commands, SFTP and scp with the file seen from the job, -L forwarding to the notebook's HTTP port, and the
refusals (another tenant, a viewer, a revoked key, agent and remote forwarding, unknown names, a job not running,
brute force)."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.portal.ssh.conftest import make_key, ssh_options

pytestmark = [pytest.mark.django_db(transaction=True)]


def ended_session(job):
    """The audit row, once the gateway has noticed the connection closed (it writes it right after)."""
    from portal.models import SshSession

    deadline = time.monotonic() + 10
    while True:
        session = SshSession.objects.filter(job=job).order_by("-id").first()
        if (session and session.ended) or time.monotonic() > deadline:
            assert session is not None and session.ended is not None
            return session
        time.sleep(0.05)


def ssh(port, key, target, command, timeout=30, options=()):
    return subprocess.run(["ssh", *options, *ssh_options(port, key), f"{target}@127.0.0.1", command], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_a_shell_command_runs_in_the_notebooks_home_with_sim_smi(gateway, running_notebook, cluster, tmp_path):
    from portal import ssh_keys

    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    done = ssh(gateway, key, "vision-lab.lab", "echo hi; pwd; sim-smi; echo token=${SIM_SSH_TOKEN:-none}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hi"
    assert lines[1].endswith("lab") or "home" in lines[1], lines[1]
    assert "NVIDIA-SMI" in done.stdout and "0.50 GPU" in done.stdout
    assert "token=none" in done.stdout   # the replica's SSH token never reaches the shell
    session = ended_session(running_notebook)
    assert session.user == cluster.alice and session.replica == "notebook-0"
    assert session.bytes_in == 0 and session.bytes_out > len("hi\n")


def test_sftp_and_scp_put_and_get_with_the_file_seen_from_the_job(gateway, running_notebook, cluster, tmp_path):
    from portal import ssh_keys
    from scheduling.backends.simulated.backend import SimulatedBackend

    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    home = SimulatedBackend().home_of("vision-lab", "lab")
    (tmp_path / "up.txt").write_text("from my laptop\n")
    batch = tmp_path / "batch"
    batch.write_text(f"put {tmp_path / 'up.txt'} up.txt\nget up.txt {tmp_path / 'down.txt'}\n")
    options = [o if o != "-p" else "-P" for o in ssh_options(gateway, key)]
    done = subprocess.run(["sftp", *options, "-b", str(batch),
                           "vision-lab.lab@127.0.0.1"], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert (home / "up.txt").read_text() == "from my laptop\n"   # the job sees it in its working directory
    assert (tmp_path / "down.txt").read_text() == "from my laptop\n"
    seen = ssh(gateway, key, "vision-lab.lab", "cat up.txt")
    assert seen.stdout == "from my laptop\n"

    copied = subprocess.run(["scp", *options, str(tmp_path / "up.txt"), "vision-lab.lab@127.0.0.1:scp.txt"],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert copied.returncode == 0, copied.stderr
    assert (home / "scp.txt").read_text() == "from my laptop\n"


def test_local_forwarding_reaches_the_notebooks_http_port(gateway, running_notebook, cluster, tmp_path):
    import socket

    import httpx

    from portal import ssh_keys
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.notebooks import endpoint_of

    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    endpoint = endpoint_of(running_notebook, SimulatedBackend())
    remote = httpx.URL(endpoint.url)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = probe.getsockname()[1]
    tunnel = subprocess.Popen(["ssh", *ssh_options(gateway, key), "-N", "-o", "ExitOnForwardFailure=yes",
                               "-L", f"{local}:localhost:{remote.port}", "vision-lab.lab@127.0.0.1"],
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, answer = time.monotonic() + 20, None
        while answer is None and time.monotonic() < deadline:
            try:
                answer = httpx.get(f"http://127.0.0.1:{local}{remote.path}lab",
                                   headers={"Authorization": f"token {endpoint.token}"}, timeout=5)
            except httpx.TransportError:
                time.sleep(0.2)
        assert answer is not None and answer.status_code == 200 and "<h1>lab</h1>" in answer.text
    finally:
        tunnel.terminate()
        tunnel.wait(10)
    assert ended_session(running_notebook).bytes_in > 0


REFUSED = "no running notebook or job by that name that you may reach over SSH"


def test_refusals_read_the_same_whether_or_not_the_job_exists(gateway, running_notebook, cluster, tmp_path):
    from portal import ssh_keys
    from portal.models import Membership, Role, SshAuthFailure
    from tests.factories import UserFactory

    bob_key, bob_public = make_key(tmp_path, "bob")
    ssh_keys.add_key(cluster.bob, "bob", bob_public)   # another tenant's owner
    viewer = UserFactory(username="vera")
    Membership.objects.create(user=viewer, workspace=cluster.vision, role=Role.VIEWER)
    vera_key, vera_public = make_key(tmp_path, "vera")
    ssh_keys.add_key(viewer, "vera", vera_public)
    alice_key, alice_public = make_key(tmp_path, "alice")
    ssh_keys.add_key(cluster.alice, "alice", alice_public)

    answers = {
        "another tenant": ssh(gateway, bob_key, "vision-lab.lab", "echo in"),
        "a viewer": ssh(gateway, vera_key, "vision-lab.lab", "echo in"),
        "a viewer, no such job": ssh(gateway, vera_key, "vision-lab.nothing", "echo in"),
        "unknown name": ssh(gateway, alice_key, "vision-lab.nothing", "echo in"),
        "unknown workspace": ssh(gateway, alice_key, "nowhere.lab", "echo in"),
        "not a target": ssh(gateway, alice_key, "lab", "echo in"),
    }
    for case, done in answers.items():
        assert done.returncode != 0 and "in" not in done.stdout, case
        assert REFUSED in done.stderr, (case, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (case, done.stderr)
    assert SshAuthFailure.objects.filter(reason="target refused").count() == len(answers)

    running_notebook.workspace.ssh_enabled = False
    running_notebook.workspace.save()
    off = ssh(gateway, alice_key, "vision-lab.lab", "echo in")
    assert off.returncode != 0 and "SSH is turned off in workspace vision-lab" in off.stderr


def test_a_revoked_key_and_a_deactivated_users_key_are_refused_at_once(gateway, running_notebook, cluster, tmp_path):
    from portal import ssh_keys
    from portal.models import SshAuthFailure

    key, public = make_key(tmp_path)
    made = ssh_keys.add_key(cluster.alice, "laptop", public)
    assert ssh(gateway, key, "vision-lab.lab", "echo in").stdout == "in\n"
    ssh_keys.revoke_key(cluster.admin, made.pk)
    refused = ssh(gateway, key, "vision-lab.lab", "echo in")
    assert refused.returncode == 255 and "Permission denied" in refused.stderr
    carol_key, carol_public = make_key(tmp_path, "carol")
    ssh_keys.add_key(cluster.carol, "carol", carol_public)
    assert ssh(gateway, carol_key, "vision-lab.lab", "echo in").stdout == "in\n"
    cluster.carol.is_active = False
    cluster.carol.save()
    assert ssh(gateway, carol_key, "vision-lab.lab", "echo in").returncode == 255
    deadline = time.monotonic() + 5
    while SshAuthFailure.objects.filter(reason="key refused").count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SshAuthFailure.objects.filter(reason="key refused").count() == 2


def test_a_job_that_is_not_running_is_refused(gateway, running_notebook, cluster, tmp_path):
    from portal import ssh_keys
    from scheduling.models import JobState

    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    type(running_notebook).objects.filter(pk=running_notebook.pk).update(state=JobState.PENDING)
    done = ssh(gateway, key, "vision-lab.lab", "echo in")
    assert done.returncode != 0 and REFUSED in done.stderr


def test_brute_force_is_rate_limited_per_source_and_audited(gateway, running_notebook, cluster, tmp_path, settings):
    from portal import ssh_keys
    from portal.models import SshAuthFailure

    settings.SSH_AUTH_FAILURES_PER_SOURCE = 3
    stranger, _ = make_key(tmp_path, "stranger")   # never registered
    for _attempt in range(3):
        assert ssh(gateway, stranger, "vision-lab.lab", "echo in").returncode == 255
    deadline = time.monotonic() + 5
    while SshAuthFailure.objects.filter(source="127.0.0.1").count() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    # even a good key, from that address, for a while; the banner says why (OpenSSH shows it at LogLevel INFO)
    limited = ssh(gateway, key, "vision-lab.lab", "echo in", options=["-o", "LogLevel=INFO"])
    assert limited.returncode == 255 and "too many refused attempts" in limited.stderr
    assert SshAuthFailure.objects.filter(source="127.0.0.1", reason="key refused").count() >= 3


def test_agent_and_remote_forwarding_are_refused(gateway, running_notebook, cluster, tmp_path):
    import asyncio

    import asyncssh

    from portal import ssh_keys

    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)

    async def client():
        async with asyncssh.connect("127.0.0.1", gateway, username="vision-lab.lab", client_keys=[str(key)],
                                    known_hosts=None, agent_forwarding=True, agent_path=None) as conn:
            shown = await conn.run("echo agent=${SSH_AUTH_SOCK:-none}", check=True)
            with pytest.raises(asyncssh.ChannelListenError):
                await conn.forward_remote_port("", 0, "localhost", 22)
            with pytest.raises(asyncssh.ChannelOpenError):   # only the replica's own ports
                await conn.open_connection("10.1.2.3", 80)
            return shown.stdout

    assert asyncio.run(client()) == "agent=none\n"
