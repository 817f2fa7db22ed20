"""The node agents' API: usage samples, heartbeats (inventory) and what runs on the node."""

from datetime import timedelta

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import authentication, exceptions, permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import MAX_BATCH, NODE_NAME, JoinRefused, ingest, join_node
from billing.models import NodeToken
from portal.api.parsers import JSONParser
from portal.credentials import presented
from scheduling.api import (
    MAX_GPUS,
    MAX_MEMORY_MIB,
    MAX_UUID,
    clock,
    get_backend,
    node_assignments,
    record_heartbeat,
)

# What a body must be to be read at all (a sample or a health figure that is wrong is refused alone, in the
# answer); "node" names the token's own node (null or left out: that node), another name answers 403.
OWN_NODE = {"type": "string", "nullable": True}
USAGE_BATCH = {"type": "object", "required": ["samples"], "properties": {
    "node": OWN_NODE, "samples": {"type": "array", "maxItems": MAX_BATCH}}}
HEARTBEAT = {"type": "object", "properties": {
    "node": OWN_NODE,
    "agent_version": {"nullable": True, "description": "text; anything else is refused alone, in `rejected`"},
    "gpus": {"type": "array", "maxItems": MAX_GPUS, "description": "each index and uuid once (else 422)",
             "items": {"type": "object", "required": ["index", "uuid", "memory_mib"], "properties": {
                 "index": {"type": "integer", "minimum": 0, "maximum": MAX_GPUS - 1},
                 "uuid": {"type": "string", "minLength": 1, "maxLength": MAX_UUID, "pattern": "^[^\\u0000]*$"},
                 "memory_mib": {"type": "integer", "minimum": 0, "maximum": MAX_MEMORY_MIB}}}}}}

# An agent posts every few seconds: "last used" to the minute is enough, and saves a write per batch.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class NodeTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        found = presented(request.META)  # the rate limiter counts what this reads
        if found is None or found.malformed:
            raise exceptions.NotAuthenticated("node agents authenticate with 'Authorization: Bearer gpn_...'")
        token = (NodeToken.objects.select_related("node").filter(digest=NodeToken.digest_of(found.token),
                                                                  revoked__isnull=True).first())
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked node token")
        now = clock.now()
        if token.last_used is None or now - token.last_used >= LAST_USED_RESOLUTION:
            NodeToken.objects.filter(pk=token.pk).update(last_used=now)
        return None, token

    def authenticate_header(self, request):
        return "Bearer"


class IsNodeAgent(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.auth, NodeToken)


class AgentView(APIView):
    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
    parser_classes = [JSONParser]  # agents speak JSON only; a form body cannot hold a batch

    def own_node(self, request, name):
        node = request.auth.node
        if name not in (None, node.name):
            raise exceptions.PermissionDenied(f"this token reports for node {node.name!r}, not {name!r}")
        return node


class UsageApi(AgentView):
    @extend_schema(request={"application/json": USAGE_BATCH}, responses=OpenApiTypes.OBJECT,
                   description='{"node", "samples": [...]} -> {"accepted": [ids], "rejected": [{"id", "reason"}]}')
    def post(self, request):
        node = self.own_node(request, request.data.get("node") if isinstance(request.data, dict) else None)
        return Response(ingest(node, request.data).to_json())


class HeartbeatApi(AgentView):
    @extend_schema(request={"application/json": HEARTBEAT}, responses=OpenApiTypes.OBJECT,
                   description='{"node", "agent_version", "gpus": [{"index", "uuid", "memory_mib", "model", "util_pct", '
                               '"memory_used_mib", "temperature_c", "ecc_uncorrected", "xid_count", "xid_last"}]} -> '
                               '{"node", "gpus": count, "rejected": [{"gpu", "field", "reason"}]}; health figures are '
                               'optional, a bad one is refused alone')
    def post(self, request):
        data = request.data
        if not isinstance(data, dict):
            raise exceptions.ValidationError('the body must be an object: {"node", "gpus": [...]}')
        node = self.own_node(request, data.get("node"))
        result = record_heartbeat(node, data.get("gpus", []), data)
        return Response({"node": node.name, "gpus": result.gpus, "rejected": result.rejected})


class AssignmentsApi(AgentView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   description='-> {"node", "assignments": [{"pod_uid", "gpu_index", "milli", "memory_mib", '
                               '"metrics_url"?, "metrics_auth"?}]}; the metrics keys only for a replica that is a '
                               "real process of the simulated cluster (its server's own figures)")
    def get(self, request):
        node = self.own_node(request, request.query_params.get("node"))
        # only the simulated cluster's replicas are local processes with figures of their own to read
        backend = get_backend() if settings.SCHEDULER_BACKEND == "simulated" else None
        return Response({"node": node.name, "assignments": node_assignments(node, backend=backend)})


class JoinApi(APIView):
    """An agent without a token yet: its pool's join token and its node name in, that node's own token
    out (the node is added to the pool when new). No other credential: the join token is the proof."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    parser_classes = [JSONParser]

    def get_authenticate_header(self, request):
        return "Bearer"  # a refused join token is a 401, not a 403

    @extend_schema(request=inline_serializer("AgentJoin", {
                       "token": serializers.CharField(allow_blank=True),
                       "node": serializers.RegexField(NODE_NAME.pattern, help_text="A Kubernetes node name")}),
                   responses=OpenApiTypes.OBJECT,
                   description='{"token": "gpj_...", "node": "gpu-node-7"} -> {"node", "pool", "token": "gpn_..."}; '
                               "401 when the join token is unknown, expired or revoked, 403 when the node is "
                               "another pool's")
    def post(self, request):
        data = request.data
        if not isinstance(data, dict) or not isinstance(data.get("token"), str) or not data.get("node"):
            raise exceptions.ValidationError('the body must be {"token": "gpj_...", "node": "<node name>"}')
        try:
            node, raw, created = join_node(data["token"], data["node"])
        except ValueError as error:
            raise exceptions.ValidationError({"node": [str(error)]}) from None
        except JoinRefused as error:
            if "another pool" in str(error):
                raise exceptions.PermissionDenied(str(error)) from None
            raise exceptions.AuthenticationFailed(str(error)) from None
        return Response({"node": node.name, "pool": node.pool.name, "token": raw}, status=201 if created else 200)
