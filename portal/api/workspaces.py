from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.response import Response

from billing.api import currency_at
from portal import ssh_access
from portal.models import Membership
from portal.selectors import get_workspace_for_user, workspaces_for
from portal.workspace_queues import workspace_queues


class WorkspaceOutput(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    role = serializers.SerializerMethodField()
    currency = serializers.SerializerMethodField(help_text="The currency the workspace is billed in this month")
    created = serializers.DateTimeField()
    ssh_enabled = serializers.BooleanField(help_text="Whether owners and members may open SSH sessions into its "
                                                     "running notebooks and jobs (owners switch it)")

    def get_role(self, workspace) -> str | None:
        user = self.context["request"].user
        return Membership.objects.filter(user=user, workspace=workspace).values_list("role", flat=True).first()

    def get_currency(self, workspace) -> str:
        return currency_at(workspace)


class WorkspaceListApi(ListAPIView):
    """The workspaces the caller is a member of."""

    serializer_class = WorkspaceOutput

    def get_queryset(self):
        return workspaces_for(self.request.user).order_by("slug")


class WorkspaceSettingsInput(serializers.Serializer):
    ssh_enabled = serializers.BooleanField(help_text="Turn SSH into the workspace's notebooks and jobs on or off")


class WorkspaceDetailApi(RetrieveAPIView):
    """A workspace of the caller's. PATCH: an owner turns SSH on or off (members get a 403, others a 404)."""

    serializer_class = WorkspaceOutput

    def get_object(self):
        return get_workspace_for_user(self.request.user, self.kwargs["slug"])

    @extend_schema(request=WorkspaceSettingsInput, responses={200: WorkspaceOutput})
    def patch(self, request, slug):
        workspace = self.get_object()
        body = WorkspaceSettingsInput(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = ssh_access.set_workspace_ssh(request.user, workspace, body.validated_data["ssh_enabled"])
        return Response(WorkspaceOutput(workspace, context=self.get_serializer_context()).data)


class QueueOutput(serializers.Serializer):
    name = serializers.CharField()
    deserved = serializers.FloatField(help_text="Deserved quota, GPUs")
    limit = serializers.FloatField(allow_null=True, help_text="Most GPUs the queue may hold; null: no limit")
    allocated = serializers.FloatField(help_text="GPUs the queue (with its sub-queues) holds now")
    fair_share = serializers.FloatField(help_text="The queue's fair share now, GPUs, as the scheduler computes it")
    pending = serializers.IntegerField(help_text="Jobs waiting in the queue, of every workspace that uses it")


class WorkspaceQueuesApi(ListAPIView):
    """The queues the workspace submits to, one entry each, with the scheduler's figures."""

    serializer_class = QueueOutput
    pagination_class = None

    def get_queryset(self):
        return workspace_queues(get_workspace_for_user(self.request.user, self.kwargs["slug"]))
