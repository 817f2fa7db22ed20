"""The one reading of the credential a request presents: authentication and the rate limiter both use
it, so whatever authenticates is what is counted.

`Authorization: Bearer <token>` (or `Token <token>`), the scheme in any case, with any whitespace
around and between the two words; or `api-key: <token>` (the header Azure-style OpenAI clients send).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMES = ("bearer", "token")


@dataclass(frozen=True)
class Presented:
    """What the request carries: a token, or a header in a token scheme that is malformed."""

    token: str = ""
    malformed: bool = False


def presented(meta) -> Presented | None:
    """The token in `meta` (request.META), Presented(malformed=True) for `Bearer` with other than one
    word after it, or None when the request presents no token (another scheme, or nothing)."""
    header = meta.get("HTTP_AUTHORIZATION", "")
    if isinstance(header, bytes):
        header = header.decode(errors="replace")
    words = header.split()
    if words and words[0].lower() in SCHEMES:
        return Presented(token=words[1]) if len(words) == 2 else Presented(malformed=True)
    if words:  # another scheme (Basic...): not ours, whatever api-key says
        return None
    api_key = meta.get("HTTP_API_KEY", "").split()
    if api_key:
        return Presented(token=api_key[0]) if len(api_key) == 1 else Presented(malformed=True)
    return None
