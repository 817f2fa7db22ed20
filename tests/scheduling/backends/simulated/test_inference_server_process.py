"""The simulated inference replica as a real process: the OpenAI-compatible API, latency from the model of
its slice (never faster than the model says), queueing when its slots are full, its counters, and refusals."""

from __future__ import annotations

import threading
import time

import pytest

from scheduling.serving.latency import ServerModel

MODULE = "scheduling.backends.simulated.inference_server"
FAST = ("--prefill-s", "0.02", "--token-s", "0.005", "--tokens", "8")       # 0.06 s of work on a whole GPU
FAST_MODEL = ServerModel(prefill_s=0.02, token_s=0.005, tokens=8)


def completion(server, **extra):
    return server.call("POST", "/v1/completions", {"model": "llama", "prompt": "say hello to the GPU", **extra})


def test_openai_endpoints(start_process):
    server = start_process(MODULE, "--model", "llama", "--gpu-milli", "500", *FAST)
    assert server.started["share"] == 0.5
    assert server.call("GET", "/health") == (200, {"status": "ok"})
    status, models = server.call("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["llama"] and models["object"] == "list"

    status, answer = completion(server, max_tokens=5)
    assert status == 200 and answer["object"] == "text_completion" and answer["model"] == "llama"
    assert answer["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    assert len(answer["choices"][0]["text"].split()) == 5

    status, chat = server.call("POST", "/v1/chat/completions", {
        "model": "llama", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
    assert status == 200 and chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] == 8 and chat["usage"]["prompt_tokens"] == 3   # the server default


def test_latency_follows_the_slice(start_process):
    half = start_process(MODULE, "--model", "llama", "--gpu-milli", "500", *FAST)
    quarter = start_process(MODULE, "--model", "llama", "--gpu-milli", "250", *FAST)
    for server, share in ((half, 0.5), (quarter, 0.25)):
        assert server.started["saturated_latency_s"] == pytest.approx(FAST_MODEL.saturated_s(share))
        assert completion(server)[0] == 200
        _, figures = server.call("GET", "/metrics?format=json")
        assert figures["latency"]["count"] == 1
        # a sleep never ends early: the request took at least the model's time on this slice
        assert figures["latency"]["sum_s"] >= FAST_MODEL.service_s(share)
        assert figures["gpu"]["share"] == share
        assert figures["gpu"]["busy_seconds_total"] >= share * FAST_MODEL.service_s(share) / FAST_MODEL.slots * 0.999
    assert quarter.started["saturated_latency_s"] > half.started["saturated_latency_s"]


def test_requests_queue_when_the_slots_are_full(start_process):
    server = start_process(MODULE, "--model", "llama", "--gpu-milli", "1000", "--slots", "1", "--batch-penalty", "0",
                           *FAST)
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(completion(server)[0])) for _ in range(3)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    took = time.monotonic() - began
    assert answers == [200, 200, 200]
    _, figures = server.call("GET", "/metrics?format=json")
    one = FAST_MODEL.service_s(1.0)
    # one slot serves them one after the other, however the threads happened to arrive
    assert took >= 3 * one
    assert figures["latency"]["sum_s"] >= 3 * one and figures["in_flight_seconds_total"] >= 3 * one * 0.999
    assert (figures["in_service"], figures["waiting"]) == (0, 0)
    assert figures["requests_total"] == 3 and figures["tokens"]["completion"] == 24


def test_a_full_queue_is_refused(start_process):
    server = start_process(MODULE, "--model", "llama", "--slots", "1", "--max-waiting", "0", "--prefill-s", "1",
                           "--token-s", "0")
    first = threading.Thread(target=lambda: completion(server))
    first.start()
    deadline = time.monotonic() + 10
    while server.call("GET", "/metrics?format=json")[1]["in_service"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    status, error = completion(server)
    first.join(30)
    assert status == 503 and error["error"]["code"] == "overloaded"


def test_counters_as_prometheus_text(start_process):
    server = start_process(MODULE, "--model", "llama", *FAST)
    completion(server)
    completion(server, model="other")
    status, text = server.call("GET", "/metrics")
    assert status == 200
    assert 'sim_requests_total{model="llama",path="/v1/completions",code="200"} 1' in text
    assert 'sim_requests_total{model="llama",path="/v1/completions",code="404"} 1' in text
    assert 'sim_request_latency_seconds_count{model="llama"} 1' in text
    assert "sim_gpu_busy_seconds_total" in text and "sim_in_flight_seconds_total" in text


@pytest.mark.parametrize(("path", "body", "status", "param"), [
    ("/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404, "model"),
    ("/v1/completions", {"prompt": "x"}, 400, "model"),
    ("/v1/completions", {"model": "llama"}, 400, "prompt"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "stream": True, "stream_options": []}, 400,
     "stream_options"),
    ("/v1/completions", {"model": "llama", "prompt": "x", "stream": True, "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/chat/completions", {"model": "llama", "messages": []}, 400, "messages"),
    ("/v1/completions", {"model": "llama", "prompt": "w " * 8190, "max_tokens": 3}, 400, "prompt"),   # the context
    ("/v1/chat/completions", {"model": "llama", "messages": [{"role": "user", "content": "w " * 8000}],
                              "max_tokens": 193, "stream": True}, 400, "messages"),
    ("/v1/embeddings", {"model": "llama"}, 404, None),
])
def test_bad_requests_get_openai_errors(start_process, path, body, status, param):
    server = start_process(MODULE, "--model", "llama", *FAST)
    got, error = server.call("POST", path, body)
    assert got == status and error["error"]["param"] == param and error["error"]["message"]
    assert server.call("POST", "/v1/completions", raw=b"{not json")[0] == 400
    assert server.call("POST", "/v1/completions", raw=b"[1, 2]")[0] == 400
    _, figures = server.call("GET", "/metrics?format=json")
    assert figures["latency"]["count"] == 0              # nothing was served


def test_api_key_and_loading(start_process):
    server = start_process(MODULE, "--model", "llama", "--api-key", "s3cret", "--startup-s", "0.5", *FAST)
    assert server.call("GET", "/health") == (503, {"status": "loading"})
    assert completion(server)[0] == 401
    key = {"Authorization": "Bearer s3cret"}
    status, error = server.call("POST", "/v1/completions", {"model": "llama", "prompt": "x"}, headers=key)
    assert status == 503 and error["error"]["code"] == "loading"
    deadline = time.monotonic() + 10
    while server.call("GET", "/health")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.call("POST", "/v1/completions", {"model": "llama", "prompt": "x"}, headers=key)[0] == 200
    assert server.call("GET", "/v1/models")[0] == 401
    assert server.call("GET", "/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401


def test_vllm_metrics_and_the_phases_of_a_request(start_process):
    server = start_process(MODULE, "--model", "llama", "--gpu-milli", "500", *FAST)
    completion(server, max_tokens=8)
    status, text = server.call("GET", "/metrics")
    assert status == 200
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc"):
        assert f'{name}{{model_name="llama"}} 0' in text
    assert 'vllm:time_to_first_token_seconds_count{model_name="llama"} 1' in text
    assert 'vllm:time_to_first_token_seconds_bucket{model_name="llama",le="+Inf"} 1' in text
    _, figures = server.call("GET", "/metrics?format=json")
    prefill, decode = FAST_MODEL.phases_s(0.5, 1, 8)
    assert figures["phases"]["prefill_seconds_total"] == pytest.approx(prefill)
    assert figures["phases"]["decode_seconds_total"] == pytest.approx(decode)
    assert f'vllm:request_prefill_time_seconds_sum{{model_name="llama"}} {prefill:.6f}' in text
    assert f'vllm:request_decode_time_seconds_sum{{model_name="llama"}} {decode:.6f}' in text
    # the time to first token is the wait and the prefill: well before the answer ends
    assert prefill <= figures["ttft"]["sum_s"] < prefill + decode


def test_an_answer_names_its_phases(start_process):
    import urllib.request
    server = start_process(MODULE, "--model", "llama", "--gpu-milli", "1000", *FAST)
    request = urllib.request.Request(server.url + "/v1/completions", method="POST",
                                     data=b'{"model": "llama", "prompt": "hi", "max_tokens": 4}',
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        headers = response.headers
    prefill, decode = FAST_MODEL.phases_s(1.0, 1, 4)
    assert float(headers["X-Prefill-Seconds"]) == pytest.approx(prefill, abs=1e-6)
    assert float(headers["X-Decode-Seconds"]) == pytest.approx(decode, abs=1e-6)
    assert float(headers["X-Time-To-First-Token-Seconds"]) >= prefill


def _events(raw: bytes) -> list:
    import json

    lines = [line for line in raw.decode().split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines), lines
    return [line[6:] if line[6:] == "[DONE]" else json.loads(line[6:]) for line in lines]


def test_streamed_answers_pace_their_tokens_as_the_latency_model_says(start_process):
    import http.client

    server = start_process(MODULE, "--model", "llama", "--gpu-milli", "500", "--prefill-s", "0.1",
                           "--token-s", "0.02", *FAST[4:])
    host, port = server.url.split("//")[1].rstrip("/").split(":")
    prefill, per_token = ServerModel(prefill_s=0.1, token_s=0.02).pace_s(0.5, 1)
    for path, body in (("/v1/completions", {"prompt": "say hello"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi there"}]})):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        started = time.monotonic()
        connection.request("POST", path, body=__import__("json").dumps(
            {"model": "llama", "stream": True, "max_tokens": 10, "stream_options": {"include_usage": True}, **body}))
        answer = connection.getresponse()
        assert answer.status == 200 and answer.getheader("content-type") == "text/event-stream"
        first = answer.read1()
        first_s = time.monotonic() - started
        raw = first + answer.read()
        total_s = time.monotonic() - started
        events = _events(raw)
        assert events[-1] == "[DONE]"
        usage = events[-2]
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 10
        tokens = events[:-2]
        assert len(tokens) == 10 and tokens[-1]["choices"][0]["finish_reason"] == "length"
        if path.endswith("chat/completions"):
            assert tokens[0]["object"] == "chat.completion.chunk"
            assert tokens[0]["choices"][0]["delta"]["role"] == "assistant"
            assert usage["usage"]["prompt_tokens"] == 2
        else:
            assert "".join(t["choices"][0]["text"] for t in tokens).split() == ["the", "model", "answers", "from",
                                                                              "a", "shared", "gpu", "slice", "the",
                                                                              "model"]
        # the first token after the prefill, the last after every token: never faster than the model
        assert prefill <= first_s < prefill + 5 * per_token + 0.2
        assert total_s >= prefill + 9 * per_token
        connection.close()


def test_a_client_that_goes_away_frees_its_slot(start_process):
    import http.client
    import json

    server = start_process(MODULE, "--model", "llama", "--slots", "1", *FAST)
    host, port = server.url.split("//")[1].rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/v1/completions", body=json.dumps(
        {"model": "llama", "prompt": "x", "stream": True, "max_tokens": 4000}))   # 20 s of tokens
    answer = connection.getresponse()
    answer.read1()
    connection.sock.shutdown(2)
    connection.close()
    started = time.monotonic()
    status, _ = completion(server, max_tokens=2)   # the one slot is free again at once
    assert status == 200 and time.monotonic() - started < 3
    _, figures = server.call("GET", "/metrics?format=json")
    assert {"path": "/v1/completions", "code": 499, "count": 1} in figures["requests"]


def test_a_burst_of_connections_waits_in_the_backlog_instead_of_being_refused():
    """The requests a cold start held reach the new replica at once: more than http.server's 5 must queue."""
    import socket

    from scheduling.backends.simulated.inference_server import make_server, parse_args

    server = make_server(parse_args(["--model", "llama", *FAST]))   # listening, not accepting yet
    sockets = []
    try:
        for _ in range(40):
            sockets.append(socket.create_connection(server.server_address[:2], timeout=2))
    finally:
        for sock in sockets:
            sock.close()
        server.server_close()
    assert len(sockets) == 40
