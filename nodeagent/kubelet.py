"""The kubelet's volume stats: the bytes each PersistentVolumeClaim mounted on this node uses
(`kubelet_volume_stats_used_bytes` on the kubelet's /metrics, Prometheus text format). The agent sends
them with a usage post, and the portal bills workspace storage on them (used, not requested, bytes)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import httpx

log = logging.getLogger(__name__)

USED_BYTES = "kubelet_volume_stats_used_bytes"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _labels(text: str) -> dict[str, str]:
    labels, at = {}, 0
    while at < len(text):
        match = _LABEL.match(text, at)
        if match is None:
            raise ValueError(f"unreadable labels: {text[:80]!r}")
        labels[match["key"]] = re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group()], match["value"])
        at = match.end()
    return labels


def parse_volume_stats(text: str) -> list[dict]:
    """Every claim's used bytes from a Prometheus text exposition: [{"namespace", "claim", "used_bytes"}].
    Other metrics, comments and unreadable lines are skipped (a line the agent cannot read is not billed)."""
    found: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        if not line.startswith(USED_BYTES):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None or match["name"] != USED_BYTES:
            continue
        try:
            labels = _labels(match["labels"] or "")
            value = float(match["value"])
        except ValueError:
            log.debug("skipped an unreadable kubelet line: %s", line[:120])
            continue
        namespace, claim = labels.get("namespace", ""), labels.get("persistentvolumeclaim", "")
        if not namespace or not claim or not value >= 0 or value == float("inf"):
            continue
        found[(namespace, claim)] = int(value)
    return [{"namespace": ns, "claim": claim, "used_bytes": used} for (ns, claim), used in sorted(found.items())]


class KubeletVolumeStats:
    """Reads the kubelet's /metrics (e.g. https://NODE_IP:10250/metrics) with the pod's service-account
    token, which needs `get` on `nodes/metrics`. The kubelet's certificate is checked against the cluster's CA
    (the account's ca.crt); `insecure` skips that, for kubelets whose serving certificate is self-signed."""

    def __init__(self, url: str, *, account_dir: Path = SERVICE_ACCOUNT_DIR, timeout_s: float = 10.0,
                 insecure: bool = False, transport: httpx.BaseTransport | None = None) -> None:
        token_file, ca_file = account_dir / "token", account_dir / "ca.crt"
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"} if token_file.exists() else {}
        verify: bool | str = False if insecure else str(ca_file) if ca_file.exists() else True
        self.verify = verify
        self.url = url
        self._http = httpx.Client(timeout=timeout_s, headers=headers, verify=verify, transport=transport)

    def read(self) -> list[dict]:
        response = self._http.get(self.url)
        response.raise_for_status()
        return parse_volume_stats(response.text)

    def close(self) -> None:
        self._http.close()
