"""Reaching a notebook's own host (portal/notebook_origin.py) on the live server: its host names resolve to
nothing here, so the client connects to the server's address and names the host in the Host header, as a
browser that resolves `*.localhost` to loopback does."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from portal.notebook_origin import COOKIE_NAME


def host_of(live, job_id: int) -> str:
    return urlsplit(live.notebook_origin.replace("{id}", str(job_id))).netloc


def origin_of(live, job_id: int) -> str:
    return live.notebook_origin.replace("{id}", str(job_id))


def on_host(live, job_id: int, cookie: str | None = None, **kwargs) -> httpx.Client:
    """An httpx client whose requests go to the notebook's host (relative URLs, no redirects followed)."""
    cookies = {COOKIE_NAME: cookie} if cookie else kwargs.pop("cookies", None)
    headers = {"Host": host_of(live, job_id), **kwargs.pop("headers", {})}
    return httpx.Client(base_url=live.url, headers=headers, cookies=cookies, follow_redirects=False, **kwargs)


def local_path(location: str) -> str:
    """A URL on a notebook's host as the path and query to ask the live server for."""
    parts = urlsplit(location)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def open_from_portal(live, portal: httpx.Client, job_id: int, path: str = "/nb/vision-lab/lab/") -> str:
    """What a browser does: the portal's link, its redirect with a ticket, the exchange on the notebook's
    host; returns the host's cookie."""
    sent = portal.get(f"{live.url}{path}", follow_redirects=False)
    assert sent.status_code == 302, sent.text
    assert sent.headers["location"].startswith(origin_of(live, job_id) + "/_ticket?ticket=")
    with on_host(live, job_id) as host:
        exchanged = host.get(local_path(sent.headers["location"]))
    assert exchanged.status_code == 302, exchanged.text
    return exchanged.cookies[COOKIE_NAME]
