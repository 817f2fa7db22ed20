"""Node tokens: how a node agent proves which node it reports for."""

from __future__ import annotations

import secrets

from billing.models import NodeToken


def create_node_token(node) -> tuple[NodeToken, str]:
    """A new token for one node; the raw value is returned once and never stored."""
    raw = NodeToken.PREFIX + secrets.token_urlsafe(32)
    return NodeToken.objects.create(node=node, digest=NodeToken.digest_of(raw), hint=raw[:10]), raw
