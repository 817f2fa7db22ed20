"""The door bounds how many requests run their view at once in one web process (WEB_REQUESTS_AT_ONCE): the
rest wait, first come first served. A slot is taken once the body is whole and given back when the
response starts or the application fails; the proxies, which wait on upstreams, are never queued."""

from __future__ import annotations

import asyncio

import pytest

from portal.door import Door


class View:
    """An ASGI application that reads the whole body, then holds the view until `release` is set,
    counting how many run at once and in what order they entered."""

    def __init__(self, stream_after_start: bool = False, fail: bool = False) -> None:
        self.running = self.most = 0
        self.entered: list[str] = []
        self.release = asyncio.Event()
        self.stream_after_start, self.fail = stream_after_start, fail

    async def __call__(self, scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        self.running += 1
        self.most = max(self.most, self.running)
        self.entered.append(scope["path"])
        try:
            if self.stream_after_start:
                await send({"type": "http.response.start", "status": 200, "headers": []})
            await self.release.wait()
            if self.fail:
                raise RuntimeError("the view failed")
        finally:
            self.running -= 1
        if not self.stream_after_start:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def scope(path: str, host: bytes = b"testserver") -> dict:
    return {"type": "http", "method": "GET", "path": path, "headers": [(b"host", host)]}


def whole_body():
    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}
    return receive


def never_finished_body():
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": b"x", "more_body": True}
    return receive


async def discard(message):
    pass


async def settle():
    for _ in range(20):
        await asyncio.sleep(0)


def test_at_most_the_bound_run_at_once_and_the_rest_enter_in_arrival_order():
    async def scenario():
        view = View()
        door = Door(view, at_once=2)
        tasks = []
        for n in range(6):
            tasks.append(asyncio.create_task(door(scope(f"/page/{n}/"), whole_body(), discard)))
            await settle()
        assert view.running == 2 and view.entered == ["/page/0/", "/page/1/"]
        view.release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return view

    view = asyncio.run(scenario())
    assert view.most == 2
    assert view.entered == [f"/page/{n}/" for n in range(6)]


def test_without_a_bound_every_request_runs_at_once():
    async def scenario():
        view = View()
        door = Door(view, at_once=0)
        tasks = [asyncio.create_task(door(scope(f"/page/{n}/"), whole_body(), discard)) for n in range(6)]
        await settle()
        running = view.running
        view.release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        return running

    assert asyncio.run(scenario()) == 6


def test_a_slot_is_given_back_when_the_response_starts_not_when_its_stream_ends():
    async def scenario():
        streaming = View(stream_after_start=True)
        door = Door(streaming, at_once=1)
        first = asyncio.create_task(door(scope("/logs/"), whole_body(), discard))
        await settle()
        second = asyncio.create_task(door(scope("/logs/2/"), whole_body(), discard))
        await settle()
        entered = list(streaming.entered)
        streaming.release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
        return entered

    assert asyncio.run(scenario()) == ["/logs/", "/logs/2/"]


def test_a_body_still_arriving_holds_no_slot():
    async def scenario():
        view = View()
        view.release.set()
        door = Door(view, at_once=1)
        upload = asyncio.create_task(door(scope("/upload/"), never_finished_body(), discard))
        await settle()
        await asyncio.wait_for(door(scope("/page/"), whole_body(), discard), 10)
        upload.cancel()
        return view.entered

    assert asyncio.run(scenario()) == ["/page/"]


def test_a_failed_view_gives_its_slot_back():
    async def scenario():
        failing = View(fail=True)
        failing.release.set()
        door = Door(failing, at_once=1)
        with pytest.raises(RuntimeError):
            await door(scope("/broken/"), whole_body(), discard)
        failing.fail = False
        await asyncio.wait_for(door(scope("/page/"), whole_body(), discard), 10)
        return failing.entered

    assert asyncio.run(scenario()) == ["/broken/", "/page/"]


@pytest.mark.parametrize("path, host", [("/serve/acme/chat/v1/chat/completions", b"testserver"),
                                        ("/nb/12/lab", b"testserver"), ("/lab", b"12.nb.localhost:8001")])
def test_the_proxies_are_never_queued(path, host):
    async def scenario():
        view = View()
        door = Door(view, at_once=1)
        held = asyncio.create_task(door(scope("/page/"), whole_body(), discard))
        await settle()
        proxied = asyncio.create_task(door(scope(path, host), whole_body(), discard))
        await settle()
        running = view.running
        view.release.set()
        await asyncio.wait_for(asyncio.gather(held, proxied), 10)
        return running

    assert asyncio.run(scenario()) == 2
