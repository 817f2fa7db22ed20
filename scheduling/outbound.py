"""The one HTTP client for URLs a tenant gave (webhooks, and whatever calls such a URL next): it never
reaches inside.

The host is resolved once, every address it has is checked (loopback, private, link-local, shared,
multicast, reserved and unspecified ranges are refused, IPv4 and IPv6, and the IPv4 address inside an
IPv4-mapped address is judged as that IPv4 address, and 6to4, Teredo and NAT64 addresses by theirs too), and the connection goes to the address that was
checked: a name that resolves elsewhere a moment later (DNS rebinding) cannot move it. TLS still checks
the certificate of the name the tenant gave (SNI and Host are that name). Redirects are not followed;
every call ends within TIMEOUT_S. The operator's WEBHOOK_ALLOW_PRIVATE_CIDRS lets named private ranges
through, for receivers on premises; BUCKET_ALLOW_PRIVATE_CIDRS does the same for the S3-compatible stores
workspaces register (scheduling/buckets.py), whose `allow` names that setting.

The platform's own calls to the workloads it started (notebooks, inference servers) are not tenant
URLs and do not come here.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from functools import lru_cache

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: its last 32 bits are an IPv4 address

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(Exception):
    """The URL is not one the platform calls: its host is (or resolves to) an inside address, or it
    does not resolve. The message is for the operator's log, not for the tenant."""


WEBHOOKS = "WEBHOOK_ALLOW_PRIVATE_CIDRS"
BUCKETS = "BUCKET_ALLOW_PRIVATE_CIDRS"


@lru_cache(maxsize=8)
def _allowed_networks(setting: str, cidrs: tuple[str, ...]
                      ) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in cidrs if c.strip())
    except ValueError as error:
        raise ImproperlyConfigured(f"{setting}: {error}") from None


def allowed_networks(allow: str = WEBHOOKS):
    """The private ranges the operator let through for one kind of tenant URL (the setting named `allow`)."""
    return _allowed_networks(allow, tuple(getattr(settings, allow, ()) or ()))


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (6to4, Teredo, NAT64)."""
    inside = [address.sixtofour, *(address.teredo or ())]
    if address in NAT64:
        inside.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in inside if a is not None]


def _inside(address: Address) -> bool:
    return (not address.is_global or address.is_private or address.is_loopback or address.is_link_local
            or address.is_multicast or address.is_reserved or address.is_unspecified)


def is_refused(address: Address, allow: str = WEBHOOKS) -> bool:
    """Whether the platform refuses to call this address (the allow-list taken into account)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:  # the IPv4 address is what is reached
        address = address.ipv4_mapped
    candidates: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        candidates += _embedded_ipv4(address)
    allowed = allowed_networks(allow)
    if any(a in net for a in candidates for net in allowed if a.version == net.version):
        return False
    return any(_inside(a) for a in candidates)


def _host_and_port(url: httpx.URL) -> tuple[str, int]:
    if url.scheme not in ("http", "https") or not url.host:
        raise Refused(f"not an http(s) URL with a host: {url.scheme}://{url.host}")
    return url.host, url.port or (443 if url.scheme == "https" else 80)


def resolve(host: str, port: int, allow: str = WEBHOOKS) -> list[Address]:
    """The host's addresses, each checked; Refused when there is none or any of them is inside."""
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        name = host.rstrip(".").lower()
        if name == "localhost" or name.endswith(".localhost"):
            raise Refused(f"{host} is this machine") from None
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            raise Refused(f"{host} does not resolve ({error})") from None
        # a scope (fe80::1%eth0) is dropped: the address alone is what is checked and called
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in found))
    if not addresses:
        raise Refused(f"{host} has no address")
    inside = [a for a in addresses if is_refused(a, allow)]
    if inside:
        raise Refused(f"{host} is an inside address ({inside[0]})")
    return addresses


def check_url(url: str, allow: str = WEBHOOKS) -> None:
    """Raise Refused for a URL the platform would not call (used when a tenant saves one)."""
    resolve(*_host_and_port(httpx.URL(url)), allow)


def post(url: str, *, content: bytes, headers: Mapping[str, str], timeout: float = TIMEOUT_S) -> httpx.Response:
    """POST to a tenant's URL, connecting to the address that was checked, within `timeout` (at most
    TIMEOUT_S). The answer's body is not read (a receiver cannot make the worker hold a large one).
    Raises Refused, or httpx.HTTPError when the call fails."""
    target = httpx.URL(url)
    host, port = _host_and_port(target)
    address = resolve(host, port)[0]
    default_port = port == (443 if target.scheme == "https" else 80)
    host_header = (f"[{host}]" if ":" in host else host) + ("" if default_port else f":{port}")
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    pinned = target.copy_with(host=str(address))
    with httpx.Client(timeout=min(timeout, TIMEOUT_S), follow_redirects=False, trust_env=False) as client:
        request = client.build_request("POST", pinned, content=content,
                                       headers={**headers, "Host": host_header}, extensions=extensions)
        response = client.send(request, stream=True)
        response.close()
        return response


def get(url: str, *, params: Mapping[str, str], headers: Mapping[str, str], allow: str = WEBHOOKS,
        max_bytes: int = 1 << 20, timeout: float = TIMEOUT_S) -> tuple[int, bytes]:
    """GET a tenant's URL the way `post` calls one (the checked address, no redirects, within `timeout`);
    (status, body), the body cut at `max_bytes` (a store cannot make the worker hold a large one).
    `headers` carry Host already when they were signed for it."""
    target = httpx.URL(url)
    host, port = _host_and_port(target)
    address = resolve(host, port, allow)[0]
    default_port = port == (443 if target.scheme == "https" else 80)
    host_header = (f"[{host}]" if ":" in host else host) + ("" if default_port else f":{port}")
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    pinned = target.copy_with(host=str(address), params=dict(params))
    with httpx.Client(timeout=min(timeout, TIMEOUT_S), follow_redirects=False, trust_env=False) as client:
        request = client.build_request("GET", pinned, headers={"Host": host_header, **headers},
                                       extensions=extensions)
        response = client.send(request, stream=True)
        try:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= max_bytes:
                    break
            return response.status_code, bytes(body[:max_bytes])
        finally:
            response.close()
