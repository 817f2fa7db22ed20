"""The agent as a process against the real portal: with only its pool's join token (a mounted Secret's
file, as the Helm DaemonSet gives it) it obtains its node's own token at start and reports; a refused
join token exits 4 with a clear message."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow_server]


def spawn(portal: str, join_file: Path, node: str, spool: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--portal", portal, "--join-token-file", str(join_file),
         "--collector", "simulated", "--interval", "0.2", "--spool", str(spool), "--node", node,
         "--sim-gpus", "2", "--sim-memory-mib", "81920", "--heartbeat-every", "1", "--backoff-cap", "1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_an_agent_with_a_join_token_gets_its_own_token_and_reports(live_server, cluster, tmp_path):
    from billing.api import create_join_token
    from billing.models import NodeToken
    from scheduling.models import Node, NodePool

    _token, raw = create_join_token(NodePool.objects.get(name="h100"), __import__("datetime").timedelta(hours=1))
    join_file = tmp_path / "join-token"
    join_file.write_text(raw + "\n")
    agent = spawn(live_server.url, join_file, "gpu-joined-1", tmp_path / "spool.sqlite")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            node = Node.objects.filter(name="gpu-joined-1").first()
            if node is not None and node.last_heartbeat is not None and node.gpus.count() == 2:
                break
            assert agent.poll() is None, agent.communicate()
            time.sleep(0.2)
        else:
            raise AssertionError("the joined agent never reported")
        assert node.pool.name == "h100"
        assert NodeToken.objects.filter(node=node, revoked__isnull=True).count() == 1
    finally:
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=15)
    assert raw not in err  # the join token is never logged


def test_an_agent_with_a_refused_join_token_exits_4(live_server, cluster, tmp_path):
    join_file = tmp_path / "join-token"
    join_file.write_text("gpj_not-a-token")
    agent = spawn(live_server.url, join_file, "gpu-joined-2", tmp_path / "spool.sqlite")
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 4 and "refused the join token" in err and "gpj_not-a-token" not in err
