from rest_framework import serializers
from rest_framework.generics import ListAPIView, RetrieveAPIView

from portal.models import Membership
from portal.selectors import get_workspace_for_user, workspaces_for


class WorkspaceOutput(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    role = serializers.SerializerMethodField()
    created = serializers.DateTimeField()

    def get_role(self, workspace) -> str | None:
        user = self.context["request"].user
        return Membership.objects.filter(user=user, workspace=workspace).values_list("role", flat=True).first()


class WorkspaceListApi(ListAPIView):
    """The workspaces the caller is a member of."""

    serializer_class = WorkspaceOutput

    def get_queryset(self):
        return workspaces_for(self.request.user).order_by("slug")


class WorkspaceDetailApi(RetrieveAPIView):
    serializer_class = WorkspaceOutput

    def get_object(self):
        return get_workspace_for_user(self.request.user, self.kwargs["slug"])
