"""`gpuctl serve keys create|list|revoke` against an httpx MockTransport answering as the keys API does."""

from __future__ import annotations

import json

import httpx

from tests.gpuctl.test_gpuctl_serve import SERVICE, FakeServer, cli, page  # noqa: F401 - cli is a fixture

KEY = {"id": 7, "name": "chat-app", "hint": "gsk_AbCdEf", "created": "2026-11-21T08:00:00Z", "created_by": "alice",
       "expires": None, "last_used": "2026-11-21T09:00:00Z", "revoked": None, "requests_per_minute": 60,
       "tokens_per_minute": None}


def test_create_prints_the_key_once_with_its_limits_sent(cli):  # noqa: F811
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE),
                         ("GET", "/api/v1/services/12/"): httpx.Response(200, json=SERVICE),
                         ("POST", "/api/v1/services/12/keys/"): httpx.Response(201, json={**KEY, "key": "gsk_secret"})})
    code, out, err = cli(server, "serve", "keys", "create", "chat", "chat-app", "--days", "0",
                         "--requests-per-minute", "60")
    assert code == 0 and out == "gsk_secret\n" and "not shown again" in err
    assert server.bodies("/api/v1/services/12/keys/") == [{"name": "chat-app", "expires_in_days": 0,
                                                           "requests_per_minute": 60}]
    code, out, err = cli(server, "serve", "keys", "create", "12", "ci", "-q")
    assert (code, out, err) == (0, "gsk_secret\n", "")


def test_list_and_revoke(cli):  # noqa: F811
    server = FakeServer({("GET", "/api/v1/services/"): page(SERVICE),
                         ("GET", "/api/v1/services/12/keys/"): httpx.Response(200, json=[KEY]),
                         ("DELETE", "/api/v1/services/12/keys/7/"): httpx.Response(204)})
    code, out, _ = cli(server, "serve", "keys", "list", "chat")
    header, row = out.splitlines()
    assert code == 0 and header.split()[:3] == ["ID", "NAME", "STARTS"]
    assert row.split()[:3] == ["7", "chat-app", "gsk_AbCdEf…"] and "gsk_secret" not in out
    code, out, _ = cli(server, "serve", "keys", "list", "chat", "-o", "json")
    assert json.loads(out) == [KEY]
    code, out, _ = cli(server, "serve", "keys", "revoke", "chat", "7")
    assert code == 0 and out == "key 7 of service chat revoked\n"
    code, _, err = cli(server, "serve", "keys", "revoke", "chat", "8")
    assert code != 0 and "keys/8/" in err
