"""HTTP client for the portal's agent API.

POST {portal}/api/v1/agent/usage       {"node": NAME, "samples": [...]}
    -> 200 {"accepted": [id, ...], "rejected": [{"index": i, "id": id, "reason": text}, ...]}
POST {portal}/api/v1/agent/heartbeat   {"node": NAME, "ts": ISO, "agent_version": V, "collector": C, "gpus": [...]}
GET  {portal}/api/v1/agent/assignments?node=NAME   (simulated collector only)
    -> 200 {"assignments": [{"pod_uid", "gpu_index", "milli", "memory_mib"}, ...]}
All with the header ``Authorization: Bearer <token>``.
POST {portal}/api/v1/agent/join        {"token": JOIN_TOKEN, "node": NAME}   (no header: an agent without a token)
    -> 200/201 {"node", "pool", "token": NODE_TOKEN}
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from nodeagent import __version__

USAGE_PATH = "/api/v1/agent/usage"
HEARTBEAT_PATH = "/api/v1/agent/heartbeat"
ASSIGNMENTS_PATH = "/api/v1/agent/assignments"
JOIN_PATH = "/api/v1/agent/join"


class PortalError(Exception):
    """The portal could not take the request now; samples stay spooled and are retried."""


class PortalAuthError(PortalError):
    """401/403: the node token is wrong, revoked, or not for this node."""


class PortalBatchTooLarge(PortalError):
    """413: the batch must be split."""


@dataclass
class UploadResult:
    accepted: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # id -> reason


def backoff_delay(failures: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Exponential backoff with 'equal jitter': half the capped delay fixed, half random."""
    if failures < 1:
        return 0.0
    ceiling = min(cap_s, base_s * 2 ** min(failures - 1, 32))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def check_portal_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"portal URL must be http(s)://host[:port][/prefix], got {url!r}")
    return url.rstrip("/")


class PortalClient:
    def __init__(self, portal: str, token: str, timeout_s: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not token:
            raise ValueError("a node token is required (--token or GPU_AGENT_TOKEN)")
        self.portal = check_portal_url(portal)
        self._http = httpx.Client(
            base_url=self.portal,
            timeout=timeout_s,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"gpu-node-agent/{__version__}"},
        )

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:  # refused, reset, timeout, DNS...
            raise PortalError(f"{method} {self.portal}{path} failed: {exc!r}") from exc
        if response.status_code in (401, 403):
            raise PortalAuthError(
                f"{method} {self.portal}{path}: HTTP {response.status_code} - the portal refused this node's "
                f"token (wrong, revoked, or issued for another node): {response.text[:200]}"
            )
        if response.status_code == 413:
            raise PortalBatchTooLarge(f"{method} {self.portal}{path}: HTTP 413 batch too large")
        if response.status_code >= 300:
            raise PortalError(f"{method} {self.portal}{path}: HTTP {response.status_code}: {response.text[:200]}")
        return response

    def send_usage(self, node: str, samples: list[dict]) -> UploadResult:
        response = self._request("POST", USAGE_PATH, json={"node": node, "samples": samples})
        return parse_usage_answer(response, [s.get("id") for s in samples])

    def send_volumes(self, node: str, volumes: list[dict]) -> object:
        """The kubelet's used bytes per claim, as a usage post with no samples; the portal's answer says
        how many it kept ({"volumes": {"recorded", "unknown"}})."""
        response = self._request("POST", USAGE_PATH, json={"node": node, "samples": [], "volumes": volumes})
        try:
            return response.json()
        except ValueError:
            return None

    def send_heartbeat(self, node: str, payload: dict) -> object:
        """The portal's answer: {"node", "gpus", "rejected": [health figures it refused]} (None if unreadable)."""
        response = self._request("POST", HEARTBEAT_PATH, json={"node": node, "agent_version": __version__, **payload})
        try:
            return response.json()
        except ValueError:
            return None

    def get_assignments(self, node: str) -> object:
        return self._request("GET", ASSIGNMENTS_PATH, params={"node": node}).json()


def _rejected_id(entry: dict, ids: list | None) -> str:
    """The refused sample: by its index in the batch when the portal gives one (an id it could not
    read may come back altered), else by id."""
    index = entry.get("index")
    if ids is not None and isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(ids):
        return str(ids[index])
    return str(entry["id"])


def parse_usage_answer(response: httpx.Response, ids: list | None = None) -> UploadResult:
    try:
        body = response.json()
        accepted = [str(i) for i in body.get("accepted", [])]
        rejected = {_rejected_id(r, ids): str(r.get("reason", "")) for r in body.get("rejected", [])}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # Unreadable answer: we cannot know what was stored, so keep everything and resend later
        # (the portal dedups by id).
        raise PortalError(f"unreadable answer from the portal ({exc!r}): {response.text[:200]}") from exc
    return UploadResult(accepted=accepted, rejected=rejected)


def exchange_join_token(portal: str, join_token: str, node: str, *, timeout_s: float = 10.0,
                        transport: httpx.BaseTransport | None = None) -> str:
    """This node's own token for the pool's join token (kept in memory by the caller, never written).
    PortalAuthError when the portal refuses the join token or the node; PortalError when it cannot
    answer now (the caller retries)."""
    base = check_portal_url(portal)
    path = f"{base}{JOIN_PATH}"
    try:
        with httpx.Client(timeout=timeout_s, transport=transport,
                          headers={"User-Agent": f"gpu-node-agent/{__version__}"}) as http:
            response = http.post(path, json={"token": join_token, "node": node})
    except httpx.HTTPError as exc:
        raise PortalError(f"POST {path} failed: {exc!r}") from exc
    if response.status_code in (400, 401, 403):
        raise PortalAuthError(f"POST {path}: HTTP {response.status_code} - the portal refused the join token for "
                              f"node {node!r}: {response.text[:200]}")
    if response.status_code >= 300:
        raise PortalError(f"POST {path}: HTTP {response.status_code}: {response.text[:200]}")
    try:
        token = response.json()["token"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PortalError(f"POST {path}: the answer has no token") from exc
    if not isinstance(token, str) or not token:
        raise PortalError(f"POST {path}: the answer has no token")
    return token
