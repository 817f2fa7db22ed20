"""A simulated inference replica: a real local HTTP server, OpenAI-compatible, as slow as its GPU slice.

    python -m scheduling.backends.simulated.inference_server --model llama-3-8b --mode fraction --gpu-milli 500

Serves `POST /v1/completions`, `POST /v1/chat/completions` (whole, or streamed as server-sent events with
`stream: true`: a chunk per token at the latency model's pace, `data: [DONE]` last, and a usage chunk
before it with `stream_options: {include_usage: true}`), `GET /v1/models`, `GET /health` (503
while the model "loads", `--startup-s`) and `GET /metrics` (Prometheus text; `?format=json` for JSON).
Each request holds one of `--slots` slots for the time the latency model gives
(`scheduling/serving/latency.py`: the slice's share, the requests in service with it, the tokens it
asks for); requests beyond the slots wait first come first served, and past `--max-waiting` are
refused with 503. A prompt and max_tokens over `--max-model-len` are refused with 400
(`context_length_exceeded`, as OpenAI and vLLM say it). With `--api-key` every path but /health needs `Authorization: Bearer <key>`.
SIGTERM drains it: it takes no new connection, the answers in flight (streams too) end, then it exits.

The counters are what the platform reads: requests by path and status, requests in flight and
waiting, `in_flight_seconds_total` (the integral of the requests in flight: its rate is the mean
concurrency), latencies (histogram, and p50/p95 of the last 1,000), tokens, and the simulated GPU use:
the slice's share held since the start, and busy in proportion to the slots in use
(utilisation = in service / slots). Times are durations measured by this process (seconds since the
last request), so the platform's own clock places them. Standard library only; no Django.

On start it prints one JSON line to stdout: {"listening": "http://HOST:PORT", "port": PORT, ...}.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scheduling.backends.simulated.json_body import read_json_object
from scheduling.serving.latency import ServerModel, slice_share

MAX_BODY = 1024 * 1024
DRAIN_S = 60.0   # the longest a stopped server waits for its answers in flight
BACKLOG = 256    # connections waiting to be accepted: the requests a cold start held arrive at once (http.server: 5)
MAX_TOKENS = 4096
MAX_MODEL_LEN = 8192   # the context: prompt and completion tokens together (vLLM's --max-model-len)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# vLLM's own buckets for vllm:time_to_first_token_seconds
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
WORDS = ("the", "model", "answers", "from", "a", "shared", "gpu", "slice")
PATHS = ("/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions")


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.param, self.code = status, kind, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class Timing:
    """One request's times: its latency (waiting included), the phases the latency model gives it, and the
    time to its first token (the wait and the prefill)."""

    latency_s: float
    prefill_s: float
    decode_s: float
    ttft_s: float


class Replica:
    """The replica's slots, queue and counters; thread-safe."""

    def __init__(self, *, model_name: str, share: float, model: ServerModel, startup_s: float, max_waiting: int,
                 max_model_len: int = MAX_MODEL_LEN):
        self.model_name, self.share, self.model = model_name, share, model
        self.max_model_len = max_model_len
        self.max_waiting = max_waiting
        self._lock = threading.Condition()
        self._started = time.monotonic()
        self._ready_at = self._started + startup_s
        self._last_change = self._started
        self.in_service = 0
        self.waiting = 0
        self.in_flight_seconds = 0.0
        self.gpu_busy_seconds = 0.0
        self.requests: dict[tuple[str, int], int] = {}
        self.latencies: deque[float] = deque(maxlen=1000)
        self.latency_count = 0
        self.latency_sum = 0.0
        self.buckets = [0] * len(LATENCY_BUCKETS)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.last_request: float | None = None
        self.prefill_seconds = 0.0
        self.decode_seconds = 0.0
        self.ttft_count = 0
        self.ttft_sum = 0.0
        self.ttft_buckets = [0] * len(TTFT_BUCKETS)
        self._answering = threading.Condition()   # its own: `release` wakes one slot waiter, never the drain
        self.answering = 0

    @contextmanager
    def answer(self):
        """One request being answered, for `drain`."""
        with self._answering:
            self.answering += 1
        try:
            yield
        finally:
            with self._answering:
                self.answering -= 1
                self._answering.notify_all()

    def drain(self, timeout_s: float) -> bool:
        """Until every request being answered has ended (False after `timeout_s`)."""
        with self._answering:
            return self._answering.wait_for(lambda: self.answering == 0, timeout_s)

    @property
    def ready(self) -> bool:
        return time.monotonic() >= self._ready_at

    def _advance(self, now: float) -> None:
        span = now - self._last_change
        self.in_flight_seconds += (self.in_service + self.waiting) * span
        self.gpu_busy_seconds += self.share * min(1.0, self.in_service / self.model.slots) * span
        self._last_change = now

    def admit(self, tokens: int) -> tuple[float, float, float]:
        """Wait for a slot and take it: (arrival time, prefill seconds, seconds per token) by the latency
        model for the requests in service with it. `release` gives the slot back."""
        with self._lock:
            if self.waiting >= self.max_waiting and self.in_service >= self.model.slots:
                raise ApiError(503, "the server is overloaded: too many requests waiting", kind="server_error",
                               code="overloaded")
            arrived = time.monotonic()   # read under the lock, so the integrals never step back
            self._advance(arrived)
            self.last_request = arrived
            self.waiting += 1
            while self.in_service >= self.model.slots:
                self._lock.wait()
            self._advance(time.monotonic())
            self.waiting -= 1
            self.in_service += 1
            prefill, per_token = self.model.pace_s(self.share, self.in_service)
        return arrived, prefill, per_token

    def release(self) -> float:
        with self._lock:
            done = time.monotonic()
            self._advance(done)
            self.in_service -= 1
            self.last_request = done
            self._lock.notify()
        return done

    def serve(self, tokens: int) -> Timing:
        """Hold a slot for the model's time; returns its timing (the latency counts the wait)."""
        arrived, prefill, per_token = self.admit(tokens)
        started = time.monotonic()
        try:
            time.sleep(prefill + tokens * per_token)
        finally:
            done = self.release()
        return Timing(latency_s=done - arrived, prefill_s=prefill, decode_s=tokens * per_token,
                      ttft_s=started - arrived + prefill)

    def record(self, path: str, status: int, timing: Timing | None = None, prompt: int = 0,
               completion: int = 0) -> None:
        path = path if path in PATHS else "other"   # a scanner's paths must not grow the counters
        latency = None if timing is None else timing.latency_s
        with self._lock:
            if timing is not None:
                self.prefill_seconds += timing.prefill_s
                self.decode_seconds += timing.decode_s
                self.ttft_count += 1
                self.ttft_sum += timing.ttft_s
                for i, bound in enumerate(TTFT_BUCKETS):
                    if timing.ttft_s <= bound:
                        self.ttft_buckets[i] += 1
            self.requests[(path, status)] = self.requests.get((path, status), 0) + 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            if latency is not None:
                self.latencies.append(latency)
                self.latency_count += 1
                self.latency_sum += latency
                for i, bound in enumerate(LATENCY_BUCKETS):
                    if latency <= bound:
                        self.buckets[i] += 1

    def figures(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            ordered = sorted(self.latencies)

            def pick(q: float) -> float | None:
                return ordered[max(0, -(-len(ordered) * q // 100) - 1)] if ordered else None

            return {
                "model": self.model_name, "ready": now >= self._ready_at, "uptime_s": now - self._started,
                "slots": self.model.slots, "in_service": self.in_service, "waiting": self.waiting,
                "in_flight_seconds_total": self.in_flight_seconds,
                "requests_total": sum(self.requests.values()),
                "requests": [{"path": p, "code": c, "count": n} for (p, c), n in sorted(self.requests.items())],
                "latency": {"count": self.latency_count, "sum_s": self.latency_sum, "p50_s": pick(50),
                            "p95_s": pick(95), "buckets": dict(zip(LATENCY_BUCKETS, self.buckets, strict=True))},
                "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
                "phases": {"prefill_seconds_total": self.prefill_seconds, "decode_seconds_total": self.decode_seconds},
                "ttft": {"count": self.ttft_count, "sum_s": self.ttft_sum,
                         "buckets": dict(zip(TTFT_BUCKETS, self.ttft_buckets, strict=True))},
                "kv_cache_usage": min(1.0, self.in_service / self.model.slots),
                "gpu": {"share": self.share, "utilisation": min(1.0, self.in_service / self.model.slots),
                        "busy_seconds_total": self.gpu_busy_seconds,
                        "held_seconds_total": self.share * (now - self._started)},
                "last_request_age_s": None if self.last_request is None else now - self.last_request,
            }


def prometheus(figures: dict[str, Any]) -> str:
    model = figures["model"].replace("\\", "\\\\").replace('"', '\\"')
    label = f'model="{model}"'
    lines = [
        "# TYPE sim_requests_total counter",
        *(f'sim_requests_total{{{label},path="{r["path"]}",code="{r["code"]}"}} {r["count"]}'
          for r in figures["requests"]),
        "# TYPE sim_requests_in_service gauge", f"sim_requests_in_service{{{label}}} {figures['in_service']}",
        "# TYPE sim_requests_waiting gauge", f"sim_requests_waiting{{{label}}} {figures['waiting']}",
        "# TYPE sim_in_flight_seconds_total counter",
        f"sim_in_flight_seconds_total{{{label}}} {figures['in_flight_seconds_total']:.6f}",
        "# TYPE sim_request_latency_seconds histogram",
    ]
    latency = figures["latency"]
    lines += [f'sim_request_latency_seconds_bucket{{{label},le="{bound:g}"}} {count}'
              for bound, count in latency["buckets"].items()]
    lines += [f'sim_request_latency_seconds_bucket{{{label},le="+Inf"}} {latency["count"]}',
              f"sim_request_latency_seconds_sum{{{label}}} {latency['sum_s']:.6f}",
              f"sim_request_latency_seconds_count{{{label}}} {latency['count']}",
              "# TYPE sim_completion_tokens_total counter",
              f"sim_completion_tokens_total{{{label}}} {figures['tokens']['completion']}",
              "# TYPE sim_gpu_share gauge", f"sim_gpu_share{{{label}}} {figures['gpu']['share']:g}",
              "# TYPE sim_gpu_utilisation gauge", f"sim_gpu_utilisation{{{label}}} {figures['gpu']['utilisation']:g}",
              "# TYPE sim_gpu_busy_seconds_total counter",
              f"sim_gpu_busy_seconds_total{{{label}}} {figures['gpu']['busy_seconds_total']:.6f}",
              "# TYPE sim_gpu_held_seconds_total counter",
              f"sim_gpu_held_seconds_total{{{label}}} {figures['gpu']['held_seconds_total']:.6f}",
              "# TYPE sim_ready gauge", f"sim_ready{{{label}}} {int(figures['ready'])}"]
    return "\n".join(lines + vllm_lines(figures, model)) + "\n"


def vllm_lines(figures: dict[str, Any], model: str) -> list[str]:
    """The figures under vLLM's own Prometheus names, so the platform reads a simulated replica and a real
    vLLM server alike: requests running and waiting, the KV cache in use (here: the slots in use), time to
    first token, and the prefill and decode seconds the cost is split by."""
    label = f'model_name="{model}"'
    ttft, phases = figures["ttft"], figures["phases"]
    lines = [
        "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{label}}} {figures['in_service']}",
        "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{label}}} {figures['waiting']}",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        f"vllm:gpu_cache_usage_perc{{{label}}} {figures['kv_cache_usage']:g}",
        "# TYPE vllm:time_to_first_token_seconds histogram",
    ]
    lines += [f'vllm:time_to_first_token_seconds_bucket{{{label},le="{bound:g}"}} {count}'
              for bound, count in ttft["buckets"].items()]
    lines += [f'vllm:time_to_first_token_seconds_bucket{{{label},le="+Inf"}} {ttft["count"]}',
              f"vllm:time_to_first_token_seconds_sum{{{label}}} {ttft['sum_s']:.6f}",
              f"vllm:time_to_first_token_seconds_count{{{label}}} {ttft['count']}"]
    for phase in ("prefill", "decode"):
        name = f"vllm:request_{phase}_time_seconds"
        lines += [f"# TYPE {name} histogram", f'{name}_bucket{{{label},le="+Inf"}} {ttft["count"]}',
                  f"{name}_sum{{{label}}} {phases[f'{phase}_seconds_total']:.6f}",
                  f"{name}_count{{{label}}} {ttft['count']}"]
    lines += ["# TYPE vllm:prompt_tokens_total counter",
              f"vllm:prompt_tokens_total{{{label}}} {figures['tokens']['prompt']}",
              "# TYPE vllm:generation_tokens_total counter",
              f"vllm:generation_tokens_total{{{label}}} {figures['tokens']['completion']}"]
    return lines


def phase_headers(timing: Timing) -> dict[str, str]:
    """What one answer tells the portal's proxy of its request's time: the prefill and decode seconds the
    latency model gave it and its time to first token (the proxy meters tokens and splits cost by them)."""
    return {"X-Prefill-Seconds": f"{timing.prefill_s:.6f}", "X-Decode-Seconds": f"{timing.decode_s:.6f}",
            "X-Time-To-First-Token-Seconds": f"{timing.ttft_s:.6f}"}


def _tokens(body: dict[str, Any], default: int) -> int:
    value = body.get("max_tokens", default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise ApiError(400, f"max_tokens must be a whole number from 1 to {MAX_TOKENS}", param="max_tokens")
    return value


def _text(tokens: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(tokens))


def _prompt_tokens(text: str) -> int:
    return max(1, len(text.split()))


class Handler(BaseHTTPRequestHandler):
    server_version = "SimulatedInference/1"
    protocol_version = "HTTP/1.1"
    replica: Replica
    api_key: str | None = None

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - the base class's name
        pass

    def _send(self, status: int, payload: Any, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, path: str, error: ApiError) -> None:
        self.close_connection = True   # the body may be unread: never reuse the connection
        self.replica.record(path, error.status)
        self._send(error.status, error.body())

    def _authorised(self) -> bool:
        return self.api_key is None or self.headers.get("Authorization", "") == f"Bearer {self.api_key}"

    def do_GET(self) -> None:   # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        if url.path == "/health":
            ready = self.replica.ready
            self._send(200 if ready else 503, {"status": "ok" if ready else "loading"})
            return
        if not self._authorised():
            self._fail(url.path, ApiError(401, "a valid API key is required", code="invalid_api_key"))
            return
        if url.path == "/v1/models":
            self.replica.record(url.path, 200)
            self._send(200, {"object": "list", "data": [{"id": self.replica.model_name, "object": "model",
                                                          "created": int(time.time()), "owned_by": "gpu-platform"}]})
        elif url.path == "/metrics":
            figures = self.replica.figures()
            if parse_qs(url.query).get("format") == ["json"]:
                self._send(200, figures)
            else:
                self._send(200, prometheus(figures), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._fail(url.path, ApiError(404, f"no such path: {url.path}", code="not_found"))

    def do_POST(self) -> None:   # noqa: N802 - http.server's name
        with self.replica.answer():
            self._post()

    def _post(self) -> None:
        path = urlsplit(self.path).path
        try:
            if path not in ("/v1/completions", "/v1/chat/completions"):
                raise ApiError(404, f"no such path: {path}", code="not_found")
            if not self._authorised():
                raise ApiError(401, "a valid API key is required", code="invalid_api_key")
            body = self._body()
            if not self.replica.ready:
                raise ApiError(503, "the model is still loading", kind="server_error", code="loading")
            answer = self._complete(path, body)
            if isinstance(answer, Stream):
                arrived, prefill, per_token = self.replica.admit(answer.tokens)
        except ApiError as error:
            self._fail(path, error)
            return
        if isinstance(answer, Stream):
            self._stream(path, answer, arrived, prefill, per_token)
        else:
            self._send(200, answer, headers=phase_headers(self.timing))

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream(self, path: str, stream: Stream, arrived: float, prefill: float, per_token: float) -> None:
        """Server-sent events as OpenAI's servers send them, a token at a time at the latency model's pace
        (prefill, then one token per `per_token`), holding the slot until the last or until the client
        goes (a write that fails: the request is cancelled and its slot freed at once)."""
        replica, sent, first = self.replica, 0, None
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            time.sleep(prefill)
            first = time.monotonic()
            for data in stream.events(per_token):
                self._chunk(b"data: " + data + b"\n\n")
                sent += 1
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:   # the client went away: the rest is never computed
            self.close_connection = True
            done = replica.release()
            told = min(sent, stream.tokens)
            replica.record(path, 499, Timing(latency_s=done - arrived, prefill_s=prefill, decode_s=told * per_token,
                                             ttft_s=(first or done) - arrived), stream.prompt, told)
            return
        done = replica.release()
        replica.record(path, 200, Timing(latency_s=done - arrived, prefill_s=prefill,
                                         decode_s=stream.tokens * per_token, ttft_s=first - arrived),
                       stream.prompt, stream.tokens)

    def _body(self) -> dict[str, Any]:
        return read_json_object(self, MAX_BODY, ApiError)

    def _complete(self, path: str, body: dict[str, Any]) -> dict[str, Any] | Stream:
        replica = self.replica
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError(400, "model is required", param="model")
        if model != replica.model_name:
            raise ApiError(404, f"The model `{model}` does not exist.", param="model", code="model_not_found")
        if body.get("n", 1) != 1:
            raise ApiError(400, "n must be 1", param="n")
        chat = path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
                    for m in messages):
                raise ApiError(400, "messages must be a non-empty list of {role, content}", param="messages")
            prompt = sum(_prompt_tokens(m["content"]) for m in messages)
        else:
            text = body.get("prompt")
            if isinstance(text, str):
                text = [text]
            if not isinstance(text, list) or not text or not all(isinstance(t, str) for t in text):
                raise ApiError(400, "prompt must be text or a list of text", param="prompt")
            prompt = sum(_prompt_tokens(t) for t in text)
        tokens = _tokens(body, replica.model.tokens)
        if prompt + tokens > replica.max_model_len:   # in OpenAI's words, as vLLM says it too
            raise ApiError(400, f"This model's maximum context length is {replica.max_model_len} tokens. However, "
                                f"you requested {prompt + tokens} tokens ({prompt} in the messages, {tokens} in the "
                                f"completion). Please reduce the length of the messages or completion.",
                           param="messages" if chat else "prompt", code="context_length_exceeded")
        if body.get("stream"):
            return Stream(chat=chat, model=model, prompt=prompt, tokens=tokens,
                          usage=_include_usage(body.get("stream_options")))
        timing = replica.serve(tokens)
        replica.record(path, 200, timing, prompt, tokens)
        self.timing = timing
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
        common = {"created": int(time.time()), "model": model, "usage": usage}
        if chat:
            return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", **common,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": _text(tokens)},
                                 "finish_reason": "length"}]}
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", **common,
                "choices": [{"index": 0, "text": _text(tokens), "logprobs": None, "finish_reason": "length"}]}


def _include_usage(options: Any) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise ApiError(400, "stream_options must be {include_usage: true|false}", param="stream_options")
    return options.get("include_usage", False)


class Stream:
    """A streamed answer: its chunks in OpenAI's shape, `data: {...}` each, the usage last when asked."""

    def __init__(self, *, chat: bool, model: str, prompt: int, tokens: int, usage: bool):
        self.chat, self.model, self.prompt, self.tokens, self.usage = chat, model, prompt, tokens, usage
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _chunk(self, choice: dict[str, Any] | None, usage: dict[str, int] | None = None) -> bytes:
        head = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": [] if choice is None else [choice]}
        if self.usage:
            head["usage"] = usage
        return json.dumps(head).encode()

    def _choice(self, text: str, finish: str | None, first: bool = False) -> dict[str, Any]:
        if self.chat:
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

    def events(self, per_token: float):
        """Each token's chunk, `per_token` seconds apart (the first at once: prefill is waited before)."""
        for i in range(self.tokens):
            if i:
                time.sleep(per_token)
            word = WORDS[i % len(WORDS)] + (" " if i < self.tokens - 1 else "")
            yield self._chunk(self._choice(word, "length" if i == self.tokens - 1 else None, first=i == 0))
        if self.usage:
            yield self._chunk(None, {"prompt_tokens": self.prompt, "completion_tokens": self.tokens,
                                     "total_tokens": self.prompt + self.tokens})


def make_server(args: argparse.Namespace) -> ThreadingHTTPServer:
    share = slice_share(args.mode, args.num_gpus, args.gpu_milli, args.mig or "")
    model = ServerModel(prefill_s=args.prefill_s, token_s=args.token_s, tokens=args.tokens,
                        fixed_part=args.fixed_part, batch_penalty=args.batch_penalty, slots=args.slots)
    replica = Replica(model_name=args.model, share=share, model=model, startup_s=args.startup_s,
                      max_waiting=args.max_waiting, max_model_len=args.max_model_len)
    handler = type("BoundHandler", (Handler,), {"replica": replica, "api_key": args.api_key})
    server_class = type("Server", (ThreadingHTTPServer,), {"request_queue_size": BACKLOG})
    server = server_class((args.host, args.port), handler)
    server.daemon_threads = True
    return server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = ServerModel()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed on start)")
    parser.add_argument("--model", required=True, help="the name clients ask for")
    parser.add_argument("--mode", default="fraction", choices=("exclusive", "fraction", "mig", "timeslice"))
    parser.add_argument("--num-gpus", type=int, default=1)
    parser.add_argument("--gpu-milli", type=int, default=1000, help="a fraction's share, 10..1000")
    parser.add_argument("--mig", default="", help="a MIG profile, e.g. 3g.40gb (mode mig)")
    parser.add_argument("--slots", type=int, default=defaults.slots)
    parser.add_argument("--prefill-s", type=float, default=defaults.prefill_s)
    parser.add_argument("--token-s", type=float, default=defaults.token_s)
    parser.add_argument("--tokens", type=int, default=defaults.tokens, help="max_tokens when a request gives none")
    parser.add_argument("--fixed-part", type=float, default=defaults.fixed_part)
    parser.add_argument("--batch-penalty", type=float, default=defaults.batch_penalty)
    parser.add_argument("--startup-s", type=float, default=0.0, help="seconds /health answers 503 (loading)")
    parser.add_argument("--max-waiting", type=int, default=1000)
    parser.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN,
                        help="the context: prompt and completion tokens together")
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args(argv)
    if args.mode == "fraction" and not 10 <= args.gpu_milli <= 1000:
        parser.error("--gpu-milli must be from 10 to 1000")
    if args.mode == "mig" and not args.mig:
        parser.error("--mig is required with --mode mig")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    server = make_server(args)
    host, port = server.server_address[:2]
    replica = server.RequestHandlerClass.replica  # type: ignore[attr-defined]
    print(json.dumps({"listening": f"http://{host}:{port}", "port": port, "model": args.model,
                      "share": replica.share, "saturated_latency_s": replica.model.saturated_s(replica.share)}),
          flush=True)
    # SIGTERM (a scale-down, a stop): no new request, the answers in flight end first, as vLLM's server does;
    # whoever stops it kills it after its grace
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        replica.drain(DRAIN_S)


if __name__ == "__main__":
    sys.exit(main())
