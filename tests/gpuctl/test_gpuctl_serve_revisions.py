"""`gpuctl serve revisions|revise|traffic|promote|rollback` against an httpx MockTransport answering as the
services API does: the bodies it sends, the table it prints, refusals in the server's words, bad input refused
before anything is sent."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.gpuctl.test_gpuctl_serve import SERVICE, FakeServer, cli, page  # noqa: F401 - the fixture

REVISIONS = [
    {
        "number": 4,
        "model": "hf.co/org/chat-8b",
        "image": "",
        "created": "2026-11-21T09:00:00Z",
        "current": True,
        "percent": 10,
        "replicas": 1,
        "gpu_seconds": 60.0,
        "cost": "0.0100",
        "requests": 20,
        "ttft_mean_s": 0.12,
        "prompt_tokens": 200,
        "completion_tokens": 640,
        "cost_per_million_prompt_tokens": "7.5000",
        "cost_per_million_completion_tokens": "13.2813",
        "tokens_per_second": 80.0,
    },
    {
        "number": 3,
        "model": "hf.co/org/chat-7b",
        "image": "",
        "created": "2026-11-21T08:00:00Z",
        "current": False,
        "percent": 90,
        "replicas": 2,
        "gpu_seconds": 7200.0,
        "cost": "1.2000",
        "requests": 180,
        "ttft_mean_s": 0.2,
        "prompt_tokens": 1800,
        "completion_tokens": 5760,
        "cost_per_million_prompt_tokens": "100.0000",
        "cost_per_million_completion_tokens": "177.0833",
        "tokens_per_second": 75.0,
    },
]
BASE = "/api/v1/services/12/"


def routes(extra: dict | None = None) -> FakeServer:
    return FakeServer(
        {
            ("GET", "/api/v1/services/"): page(SERVICE),
            ("GET", BASE): httpx.Response(200, json=SERVICE),
            ("GET", f"{BASE}revisions/"): httpx.Response(200, json=REVISIONS),
            **(extra or {}),
        }
    )


def test_revisions_are_listed_with_their_traffic_tokens_and_cost(cli):  # noqa: F811
    code, out, err = cli(routes(), "serve", "revisions", "chat")
    assert (code, err) == (0, "")
    header, newest, older = out.splitlines()
    assert header.split()[:4] == ["REVISION", "CURRENT", "TRAFFIC", "REPLICAS"]
    assert newest.split()[:4] == ["4", "*", "10%", "1"] and "13.2813" in newest
    assert older.split()[:3] == ["3", "90%", "2"] and "177.0833" in older
    code, out, _ = cli(routes(), "serve", "revisions", "12", "-o", "json")
    assert code == 0 and json.loads(out) == REVISIONS


def test_revise_traffic_promote_and_rollback_send_what_the_api_takes(cli):  # noqa: F811
    made = httpx.Response(201, json=REVISIONS)
    server = routes(
        {
            ("POST", f"{BASE}revisions/"): made,
            ("POST", f"{BASE}traffic/"): httpx.Response(200, json=REVISIONS),
            ("POST", f"{BASE}promote/"): httpx.Response(200, json=REVISIONS),
            ("POST", f"{BASE}rollback/"): httpx.Response(200, json=REVISIONS),
        }
    )
    assert (
        cli(
            server,
            "serve",
            "revise",
            "chat",
            "--model-registry",
            "hf.co/org/chat-8b",
            "--model-name",
            "chat",
            "--split",
            "3=90",
            "4=10",
        )[0]
        == 0
    )
    assert server.bodies(f"{BASE}revisions/") == [
        {
            "model": {"registry": "hf.co/org/chat-8b", "name": "chat"},
            "traffic": [{"revision": 3, "percent": 90}, {"revision": 4, "percent": 10}],
        }
    ]
    assert cli(server, "serve", "traffic", "chat", "3=50", "4=50%")[0] == 0
    assert server.bodies(f"{BASE}traffic/") == [
        {"traffic": [{"revision": 3, "percent": 50}, {"revision": 4, "percent": 50}]}
    ]
    assert cli(server, "serve", "promote", "chat", "4")[0] == 0
    assert server.bodies(f"{BASE}promote/") == [{"revision": 4}]
    assert cli(server, "serve", "rollback", "chat")[0] == 0
    assert [r.url.path for r in server.requests if r.method == "POST"][-1] == f"{BASE}rollback/"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("serve", "revise", "chat"), "needs --image, --model-path or --model-registry"),
        (("serve", "traffic", "chat", "3:90"), "is not REVISION=PERCENT"),
    ],
)
def test_bad_input_is_refused_before_anything_is_sent(cli, argv, message):  # noqa: F811
    server = routes()
    code, out, err = cli(server, *argv)
    assert (code, out) == (2, "") and message in err
    assert not [r for r in server.requests if r.method == "POST"]


def test_a_refusal_says_the_servers_words(cli):  # noqa: F811
    problem = {
        "type": "urn:gpu-platform:problem:validation",
        "status": 400,
        "title": "Invalid input",
        "detail": "the percents add up to 90, not 100",
        "errors": [],
    }
    server = routes({("POST", f"{BASE}traffic/"): httpx.Response(400, json=problem)})
    code, out, err = cli(server, "serve", "traffic", "chat", "3=60", "4=30")
    assert code != 0 and out == ""
    assert "service chat (12): the split was refused" in err and "add up to 90" in err
