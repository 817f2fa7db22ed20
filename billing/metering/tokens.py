"""Node tokens: how a node agent proves which node it reports for; join tokens: how an agent that has
none yet obtains its own (a short-lived secret, limited to one pool, exchanged for the node's token)."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

from django.db import transaction

from billing.models import JoinToken, NodeToken
from scheduling.api import clock
from scheduling.models import Node, NodePool

NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
MAX_JOIN_TTL = timedelta(days=365)


class JoinRefused(Exception):
    """The join token is unknown, expired or revoked, or the node belongs to another pool."""


def create_node_token(node) -> tuple[NodeToken, str]:
    """A new token for one node; the raw value is returned once and never stored."""
    raw = NodeToken.PREFIX + secrets.token_urlsafe(32)
    return NodeToken.objects.create(node=node, digest=NodeToken.digest_of(raw), hint=raw[:10]), raw


def create_join_token(pool: NodePool, ttl: timedelta) -> tuple[JoinToken, str]:
    """A join token for `pool`, valid for `ttl` (at most a year); the raw value is returned once."""
    if not timedelta(0) < ttl <= MAX_JOIN_TTL:
        raise ValueError(f"a join token lives more than 0 s and at most {MAX_JOIN_TTL.days} days")
    raw = JoinToken.PREFIX + secrets.token_urlsafe(32)
    token = JoinToken.objects.create(pool=pool, digest=JoinToken.digest_of(raw), hint=raw[:10],
                                     expires=clock.now() + ttl)
    return token, raw


@transaction.atomic
def join_node(raw_join_token: str, node_name: str) -> tuple[Node, str, bool]:
    """Exchange a join token for `node_name`'s own token: the node is added to the token's pool when
    new (not ready until its agent reports), and its earlier tokens are revoked (a restarted agent
    joins again). Returns (node, raw node token, created). JoinRefused when the token does not allow it,
    ValueError for a malformed node name."""
    if not isinstance(node_name, str) or not NODE_NAME.fullmatch(node_name):
        raise ValueError("node must be a Kubernetes node name (lower-case letters, digits, '-' and '.')")
    now = clock.now()
    token = (JoinToken.objects.select_related("pool").filter(digest=JoinToken.digest_of(str(raw_join_token)),
                                                             revoked__isnull=True, expires__gt=now).first())
    if token is None:
        raise JoinRefused("unknown, expired or revoked join token")
    node = Node.objects.select_for_update().filter(name=node_name).first()
    created = node is None
    if created:
        node = Node.objects.create(name=node_name, pool=token.pool, agent_silent=True)
    elif node.pool_id != token.pool_id:
        raise JoinRefused(f"node {node_name!r} belongs to another pool than this join token's")
    NodeToken.objects.filter(node=node, revoked__isnull=True).update(revoked=now)
    _token, raw = create_node_token(node)
    return node, raw, created
