"""AWS Signature Version 4 for S3 requests, standard library only.

The platform signs the requests it makes to a workspace's bucket (listing its objects, scheduling/buckets.py),
and the simulated cluster's training process signs the object it writes (backends/simulated/training_process.py,
which loads this file by path: it imports no package). Path-style addresses only ({endpoint}/{bucket}/{key}):
every S3-compatible store answers them, virtual-host names need DNS per bucket.

The algorithm is AWS's published one: a canonical request, a string to sign under the date's scope, and a
signing key derived from the secret by an HMAC chain (date, region, service, "aws4_request").
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _encode(text: str, safe: str = "") -> str:
    # RFC 3986 unreserved characters stay; everything else is %XX (upper case), as SigV4 asks
    return quote(text, safe="-_.~" + safe)


def canonical_query(params: dict[str, str]) -> str:
    return "&".join(f"{_encode(k)}={_encode(v)}" for k, v in sorted(params.items()))


def object_url(endpoint: str, bucket: str, key: str = "") -> str:
    """The path-style URL of a bucket (key "") or of one object in it."""
    return f"{endpoint.rstrip('/')}/{_encode(bucket)}/{_encode(key, '/')}" if key else \
        f"{endpoint.rstrip('/')}/{_encode(bucket)}"


def sign(method: str, url: str, *, params: dict[str, str] | None = None, access_key: str, secret_key: str,
         region: str, now: datetime, payload_sha256: str = EMPTY_SHA256, service: str = "s3") -> dict[str, str]:
    """The headers that make the request signed: Host, X-Amz-Date, X-Amz-Content-Sha256 and Authorization.
    `url` holds no query (the query is `params`); `now` is UTC wall time (the store refuses a skewed one)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    headers = {"host": host, "x-amz-content-sha256": payload_sha256, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([
        method.upper(), parts.path or "/", canonical_query(params or {}),
        "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)), signed, payload_sha256])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return {"Host": host, "X-Amz-Date": amz_date, "X-Amz-Content-Sha256": payload_sha256,
            "Authorization": f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={signed}, "
                             f"Signature={signature}"}
