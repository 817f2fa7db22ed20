"""A workspace's secrets and registry credentials over the API: any member lists them (names, who changed each
and when); an owner adds one (POST again with a name in use replaces its value) and deletes one. No answer ever
holds a value. Thin views over portal.secrets.services."""

from __future__ import annotations

from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.secrets import services
from portal.selectors import get_workspace_for_user
from scheduling.api import secrets


class SecretOutput(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes of the value")
    created = serializers.DateTimeField()
    changed = serializers.DateTimeField(help_text="When the value was last set")
    changed_by = serializers.SerializerMethodField(help_text="Who set it last")

    def get_changed_by(self, row) -> str:
        return row.changed_by.username if row.changed_by else row.changed_by_name


class SecretInput(serializers.Serializer):
    name = serializers.CharField(max_length=63, help_text="A DNS label, e.g. hf-token")
    value = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True,
                                  help_text="At most 64 KiB of text; never returned")


class RegistryOutput(serializers.Serializer):
    server = serializers.CharField()
    username = serializers.CharField()
    created = serializers.DateTimeField()
    changed = serializers.DateTimeField()
    changed_by = serializers.SerializerMethodField()

    def get_changed_by(self, row) -> str:
        return row.changed_by.username if row.changed_by else row.changed_by_name


class RegistryInput(serializers.Serializer):
    server = serializers.CharField(max_length=253, help_text="The registry host, e.g. registry.example.com")
    username = serializers.CharField(max_length=secrets.MAX_USERNAME)
    password = serializers.CharField(allow_blank=True, trim_whitespace=False, write_only=True,
                                     help_text="The password or token; never returned")


class SecretListApi(APIView):
    """The workspace's secrets (names and who changed them when); POST adds one or replaces its value (owners)."""

    @extend_schema(responses={200: SecretOutput(many=True)})
    def get(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        rows = secrets.secrets_of(workspace).select_related("changed_by")
        return Response(SecretOutput(rows, many=True).data)

    @extend_schema(request=SecretInput, responses={201: SecretOutput, 200: SecretOutput})
    def post(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        secrets.require_owner(request.user, workspace)
        given = SecretInput(data=request.data)
        given.is_valid(raise_exception=True)
        row, created = services.set_secret(request.user, workspace, given.validated_data["name"],
                                           given.validated_data["value"])
        return Response(SecretOutput(row).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class SecretDetailApi(APIView):
    """One secret's name and who changed it when; DELETE removes it (owners). Jobs already submitted that read
    it start without it."""

    @extend_schema(responses={200: SecretOutput})
    def get(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        row = secrets.secrets_of(workspace).select_related("changed_by").filter(name=name).first()
        if row is None:
            raise secrets.NoSuchSecret(gettext("workspace %(workspace)s has no secret %(name)s") % {
                "workspace": workspace.slug, "name": repr(name)})
        return Response(SecretOutput(row).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        services.delete_secret(request.user, workspace, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RegistryListApi(APIView):
    """The workspace's registry credentials (server and username); POST adds one or replaces it (owners)."""

    @extend_schema(responses={200: RegistryOutput(many=True)})
    def get(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        return Response(RegistryOutput(secrets.registries_of(workspace).select_related("changed_by"), many=True).data)

    @extend_schema(request=RegistryInput, responses={201: RegistryOutput, 200: RegistryOutput})
    def post(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        secrets.require_owner(request.user, workspace)
        given = RegistryInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        row, created = services.set_registry(request.user, workspace, data["server"], data["username"],
                                             data["password"])
        return Response(RegistryOutput(row).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RegistryDetailApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, server):
        workspace = get_workspace_for_user(request.user, slug)
        services.delete_registry(request.user, workspace, server)
        return Response(status=status.HTTP_204_NO_CONTENT)
