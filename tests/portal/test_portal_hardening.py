"""Security headers, rate limits, and serving through a Redis outage."""

import json
import re
import subprocess
import sys
import uuid

import httpx
import pytest
from django.conf import settings
from django.test import override_settings
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from portal.services import create_api_token
from portal.testing import ROOT, child_env, free_port, stop_processes, wait_for_http

DEAD_REDIS = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
REDIS_DOWN = {
    "CACHES": {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": DEAD_REDIS}},
    "CHANNEL_LAYERS": {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                                   "CONFIG": {"hosts": [DEAD_REDIS]}}},
    "REDIS_URL": DEAD_REDIS,
}


def _ip() -> str:
    """A client address of its own: the counters live in the shared Redis."""
    return f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"


# --- Content-Security-Policy ------------------------------------------------------------------

def test_pages_carry_a_csp_without_inline_script(client):
    response = client.get("/login/")
    csp = response.headers["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", csp).group(1)
    assert script_src.split() == ["'self'"], csp
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp


def test_templates_have_no_inline_script_or_event_handlers():
    offenders = []
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            if "src=" not in tag and not re.search(r'type="(application/json|text/plain)"', tag):
                offenders.append(f"{path.name}: {tag}")
        offenders += [f"{path.name}: {m}" for m in re.findall(r"\son[a-z]+=", text)]
        offenders += [f"{path.name}: javascript: URL" for _ in re.findall(r"javascript:", text)]
    assert offenders == []


# --- rate limits --------------------------------------------------------------------------------

@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "login": "3/60"})
@pytest.mark.django_db
def test_login_posts_over_the_limit_get_429_with_retry_after(client):
    ip = _ip()
    codes = [client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ip).status_code
             for _ in range(3)]
    assert 429 not in codes
    refused = client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ip)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Another client is not affected, nor is reading the login page.
    assert client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=_ip()).status_code != 429
    assert client.get("/login/", REMOTE_ADDR=ip).status_code == 200


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "api_token": "2/60"})
@pytest.mark.django_db
def test_api_token_requests_over_the_limit_get_429(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    assert [client.get("/api/v1/workspaces/", **auth).status_code for _ in range(2)] == [200, 200]
    refused = client.get("/api/v1/workspaces/", **auth)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    # Guessing tokens is limited per token string too.
    guess = {"HTTP_AUTHORIZATION": f"Bearer gpt_{uuid.uuid4().hex}"}
    assert [client.get("/api/v1/workspaces/", **guess).status_code for _ in range(3)] == [401, 401, 429]


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "agent": "2/60"})
@pytest.mark.django_db
def test_agent_requests_over_the_limit_get_429(client):
    auth = {"HTTP_AUTHORIZATION": f"Bearer gpn_{uuid.uuid4().hex}"}
    codes = [client.post("/api/v1/agent/heartbeat", {}, content_type="application/json", **auth).status_code
             for _ in range(3)]
    assert 429 not in codes[:2] and codes[2] == 429


# --- Redis down ---------------------------------------------------------------------------------

@override_settings(**REDIS_DOWN, RATE_LIMITS={"login": "1/60", "api_token": "1/60", "agent": "1/60"})
@pytest.mark.django_db
def test_pages_and_api_answer_with_redis_unreachable(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    for _ in range(2):  # over the limits: the limiter fails open without its cache
        api = client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert api.status_code == 200, api.content
    client.force_login(tenants.alice)
    assert client.get("/").status_code == 200
    assert client.get("/jobs/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_websocket_with_redis_down_is_told_paused_and_the_server_keeps_serving(tenants, client, tmp_path):
    client.force_login(tenants.alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    port = free_port()
    log = tmp_path / "daphne.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "portal.asgi:application"],
            cwd=ROOT, env=child_env(REDIS_URL=DEAD_REDIS), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/login/", proc=proc)
        for path in ("/ws/workspaces/vision-lab/", "/ws/workspaces/vision-lab/"):  # and again: a reconnect
            with connect(f"ws://127.0.0.1:{port}{path}", origin=base, additional_headers={"Cookie": cookie},
                         open_timeout=15) as ws:
                assert json.loads(ws.recv(timeout=15)) == {"type": "paused"}
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=15)
                assert closed.value.rcvd.code == 4013
        assert proc.poll() is None
        page = httpx.get(f"{base}/", headers={"Cookie": cookie}, timeout=15)
        assert page.status_code == 200
        assert 'id="live-banner"' in page.text
        assert httpx.get(f"{base}/readyz", timeout=15).status_code == 503  # and says why
    finally:
        stop_processes([proc])
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
