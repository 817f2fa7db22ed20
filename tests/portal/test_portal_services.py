"""The real moving parts: /healthz, a Celery worker through Redis, websockets through Channels."""

import asyncio
import json
import os
import signal
import subprocess
import sys

import httpx
import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from portal.services import publish_to_workspace, workspace_group
from portal.tasks import add
from portal.testing import ROOT, free_port, wait_for_http


def test_healthz_answers_without_checking_dependencies(client, db, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # liveness: an outage must not restart the pods
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_real_celery_worker_runs_a_task_and_stores_the_result(celery_worker_queue):
    assert not add.app.conf.task_always_eager
    result = add.apply_async((2, 40), queue=celery_worker_queue)
    assert result.get(timeout=60) == 42
    stored = redis.Redis.from_url(settings.REDIS_URL).get(f"celery-task-meta-{result.id}")
    assert json.loads(stored)["result"] == 42


def _session_cookie(client, user) -> str:
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def _ws(server, path, cookie=""):
    url = server.url.replace("http://", "ws://") + path
    headers = {"Cookie": cookie} if cookie else {}
    return connect(url, origin=server.url, additional_headers=headers, open_timeout=10)


@pytest.mark.django_db(transaction=True)
def test_websocket_events_reach_only_members(live_daphne, tenants, client):
    alice_cookie = _session_cookie(client, tenants.alice)
    bob_cookie = _session_cookie(client.__class__(), tenants.bob)
    with _ws(live_daphne, "/ws/workspaces/vision-lab/", alice_cookie) as alice, \
         _ws(live_daphne, "/ws/workspaces/nlp-group/", bob_cookie) as bob:
        assert json.loads(alice.recv(timeout=5)) == {"type": "hello", "workspace": "vision-lab"}
        assert json.loads(bob.recv(timeout=5))["workspace"] == "nlp-group"
        publish_to_workspace(tenants.vision, {"job": 7, "state": "Running"})
        assert json.loads(alice.recv(timeout=5)) == {"type": "event", "event": {"job": 7, "state": "Running"}}
        with pytest.raises(TimeoutError):
            bob.recv(timeout=1)


@pytest.mark.django_db(transaction=True)
def test_websocket_join_is_refused_for_outsiders_and_anonymous(live_daphne, tenants, client):
    bob_cookie = _session_cookie(client, tenants.bob)
    for cookie in (bob_cookie, ""):
        with pytest.raises(InvalidStatus) as refused:
            _ws(live_daphne, "/ws/workspaces/vision-lab/", cookie)
        assert refused.value.response.status_code == 403


def test_workspace_groups_are_distinct_per_workspace(tenants):
    vision, nlp = tenants.vision.pk, tenants.nlp.pk

    async def scenario():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(workspace_group(nlp), channel)
        await layer.group_send(workspace_group(vision), {"type": "live.event", "event": {"n": 1}})
        await layer.group_send(workspace_group(nlp), {"type": "live.event", "event": {"n": 2}})
        message = await asyncio.wait_for(layer.receive(channel), timeout=5)
        await layer.group_discard(workspace_group(nlp), channel)
        return message

    assert async_to_sync(scenario)()["event"] == {"n": 2}


def test_live_events_reach_their_groups_in_order_as_group_send_delivers_them(monkeypatch):
    """Published in pipelines (of 3 here), a subscriber of each group gets its events, each once, in order."""
    from asgiref.sync import sync_to_async

    from portal import services

    assert type(get_channel_layer()) is services.RedisPubSubChannelLayer
    monkeypatch.setattr(services, "PIPELINE_CHUNK", 3)

    async def scenario():
        layer = get_channel_layer()
        first, second = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("job.1", first)
        await layer.group_add("job.2", second)
        await layer.group_add("operators-test", second)
        await sync_to_async(services._send)([(["job.1", "operators-test"], {"n": n}) for n in range(4)]
                                            + [(["job.2"], {"n": 9})])
        got = [await asyncio.wait_for(layer.receive(first), timeout=5) for _ in range(4)]
        other = [await asyncio.wait_for(layer.receive(second), timeout=5) for _ in range(5)]
        for channel, group in ((first, "job.1"), (second, "job.2"), (second, "operators-test")):
            await layer.group_discard(group, channel)
        return got, other

    got, other = async_to_sync(scenario)()
    assert got == [{"type": "live.event", "text": json.dumps({"type": "event", "event": {"n": n}})} for n in range(4)]
    assert [json.loads(m["text"])["event"]["n"] for m in other] == [0, 1, 2, 3, 9]


@pytest.mark.slow  # make run's whole process set
def test_make_run_process_set_starts_and_stops_cleanly(tmp_path):
    """`python -m portal.run` (what `make run` ends with) on a fresh var dir and database."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(VAR_DIR=str(tmp_path / "var"), DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               PORT=str(free_port()), PYTHONUNBUFFERED="1",
               NOTEBOOK_ORIGIN=f"http://{{id}}.nb.localhost:{free_port()}")  # notebooks' hosts: a second server
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        runner = subprocess.Popen([sys.executable, "-m", "portal.run"], cwd=ROOT, env=env,
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{env['PORT']}/healthz", timeout=60, proc=runner)
        health = httpx.get(f"http://127.0.0.1:{env['PORT']}/readyz")
        assert health.status_code == 200, health.text
        assert health.json()["redis"] == "ok"
    finally:
        runner.send_signal(signal.SIGINT)
        code = runner.wait(timeout=30)
    output = log.read_text()
    for name in ("web", "notebooks", "worker", "beat", "agents"):
        assert f"stopped: {name}" in output, output[-3000:]
    assert code in (0, 130, -2, 1), output[-2000:]
    assert not (tmp_path / "var" / "redis.sock").exists() or not _answers(tmp_path / "var" / "redis.sock")


def _answers(sock) -> bool:
    try:
        return redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=0.5).ping()
    except (redis.ConnectionError, FileNotFoundError):
        return False


@pytest.mark.django_db(transaction=True)
def test_job_and_operator_sockets_are_authorised(live_daphne, cluster, client):
    from django.contrib.auth import get_user_model

    from scheduling.services import cancel_job, submit_job
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    alice = _session_cookie(client, cluster.alice)
    bob = _session_cookie(client.__class__(), cluster.bob)
    admin = _session_cookie(client.__class__(), get_user_model().objects.get(username="admin"))
    for cookie, path in ((bob, f"/ws/jobs/{job.pk}/"), (alice, "/ws/cluster/"), (bob, "/ws/cluster/")):
        with pytest.raises(InvalidStatus):
            _ws(live_daphne, path, cookie)
    with _ws(live_daphne, f"/ws/jobs/{job.pk}/", alice) as job_socket, \
         _ws(live_daphne, "/ws/cluster/", admin) as operators:
        assert json.loads(job_socket.recv(timeout=5)) == {"type": "hello", "job": job.pk}
        assert json.loads(operators.recv(timeout=5)) == {"type": "hello", "cluster": True}
        cancel_job(user=cluster.alice, job=job)
        for socket in (job_socket, operators):
            event = json.loads(socket.recv(timeout=5))["event"]
            assert (event["job"], event["kind"], event["state"]) == (job.pk, "cancelled", "Cancelled")
