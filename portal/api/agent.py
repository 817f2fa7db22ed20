"""The node agents' API: usage samples, heartbeats (inventory) and what runs on the node."""

import secrets
from datetime import timedelta

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, permissions, status
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.metering.ingest import BatchError, ingest
from billing.models import NodeToken
from scheduling import clock
from scheduling.models import ACTIVE_STATES, Gpu, Replica

# An agent posts every few seconds: "last used" to the minute is enough, and saves a write per batch.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def create_node_token(node) -> tuple[NodeToken, str]:
    """A new token for one node; the raw value is returned once and never stored."""
    raw = NodeToken.PREFIX + secrets.token_urlsafe(32)
    return NodeToken.objects.create(node=node, digest=NodeToken.digest_of(raw), hint=raw[:10]), raw


class NodeTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if len(header) != 2 or header[0].lower() != "bearer":
            raise exceptions.NotAuthenticated("node agents authenticate with 'Authorization: Bearer gpn_...'")
        token = (NodeToken.objects.select_related("node").filter(digest=NodeToken.digest_of(header[1]),
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

    def own_node(self, request, name):
        node = request.auth.node
        if name not in (None, node.name):
            raise exceptions.PermissionDenied(f"this token reports for node {node.name!r}, not {name!r}")
        return node


class UsageApi(AgentView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT,
                   description='{"node", "samples": [...]} -> {"accepted": [ids], "rejected": [{"id", "reason"}]}')
    def post(self, request):
        node = self.own_node(request, request.data.get("node") if isinstance(request.data, dict) else None)
        try:
            result = ingest(node, request.data)
        except BatchError as error:
            return Response({"detail": str(error)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(result.to_json())


class HeartbeatApi(AgentView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    @transaction.atomic
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        node = self.own_node(request, data.get("node"))
        gpus = data.get("gpus", [])
        if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
            return Response({"detail": "gpus must be a list of objects"}, status=status.HTTP_400_BAD_REQUEST)
        known = {g.index: g for g in node.gpus.all()}
        for gpu in gpus:
            index, uuid, memory = gpu.get("index"), gpu.get("uuid"), gpu.get("memory_mib")
            if not isinstance(index, int) or not isinstance(uuid, str) or not isinstance(memory, int):
                return Response({"detail": f"gpu entry needs index, uuid and memory_mib: {gpu!r}"},
                                status=status.HTTP_400_BAD_REQUEST)
            if index not in known:
                Gpu.objects.create(node=node, index=index, uuid=uuid, memory_mib=memory)
            elif (known[index].uuid, known[index].memory_mib) != (uuid, memory):
                Gpu.objects.filter(pk=known[index].pk).update(uuid=uuid, memory_mib=memory)
        node.last_heartbeat = clock.now()
        node.save(update_fields=["last_heartbeat"])
        return Response({"node": node.name, "gpus": len(gpus)})


class AssignmentsApi(AgentView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        node = self.own_node(request, request.query_params.get("node"))
        assignments = [
            {"pod_uid": str(uid), "gpu_index": index, "milli": (slice_ or {}).get("gpu_milli", 1000),
             "memory_mib": (slice_ or {}).get("gpu_mem_mib", 0)}
            for uid, gpus, slice_ in Replica.objects.filter(node=node, state__in=ACTIVE_STATES)
            .values_list("uid", "gpu_indices", "slice")
            for index in gpus
        ]
        return Response({"node": node.name, "assignments": assignments})
