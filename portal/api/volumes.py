"""Workspace volumes and datasets over the API: list, create, resize, delete, upload a file; snapshot a volume
into a dataset version, delete a version, share a dataset with another workspace. Thin views over
scheduling's storage services; a workspace is reached only by its members (404 for anyone else)."""

from __future__ import annotations

from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.selectors import get_workspace_for_user
from scheduling.api import get_backend, storage
from scheduling.models import AccessMode, Volume

# Writes are a member's everyday work, as submitting is; sharing data with another workspace needs manage.
EVERYDAY = {"POST": "submit", "PATCH": "submit", "DELETE": "submit"}


class VolumeOutput(serializers.Serializer):
    name = serializers.CharField()
    size_gib = serializers.IntegerField()
    storage_class = serializers.CharField()
    access_mode = serializers.CharField()
    created = serializers.DateTimeField()
    home_of = serializers.CharField(help_text="The notebook whose home this volume is; empty for an ordinary volume")


class VolumeCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=63)
    size_gib = serializers.IntegerField(min_value=1, max_value=storage.MAX_VOLUME_GIB)
    storage_class = serializers.CharField(max_length=63, required=False, default="standard")
    access_mode = serializers.ChoiceField(choices=AccessMode.values, required=False,
                                          default=AccessMode.READ_WRITE_ONCE)


class VolumeResizeInput(serializers.Serializer):
    size_gib = serializers.IntegerField(min_value=1, max_value=storage.MAX_VOLUME_GIB,
                                        help_text="The new size, GiB: a volume only grows")


class StorageOutput(serializers.Serializer):
    volumes = VolumeOutput(many=True)
    used_gib = serializers.IntegerField()
    quota_gib = serializers.IntegerField(allow_null=True, help_text="The most GiB its volumes may hold; null: no limit")


class VolumeListApi(APIView):
    """The workspace's volumes, with the GiB they hold and its storage quota; POST creates one."""

    token_scopes = EVERYDAY

    @extend_schema(operation_id="v1_workspaces_volumes_list", responses={200: StorageOutput})
    def get(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        volumes = Volume.objects.filter(workspace=workspace).order_by("name")
        return Response(StorageOutput({"volumes": volumes, "used_gib": storage.used_gib(workspace),
                                       "quota_gib": storage.quota_gib(workspace)}).data)

    @extend_schema(request=VolumeCreateInput, responses={201: VolumeOutput})
    def post(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        body = VolumeCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        volume = storage.create_volume(request.user, workspace, **body.validated_data)
        return Response(VolumeOutput(volume).data, status=status.HTTP_201_CREATED)


class VolumeDetailApi(APIView):
    """One volume; PATCH grows it, DELETE deletes it (refused while a live job mounts it)."""

    token_scopes = EVERYDAY

    @extend_schema(responses={200: VolumeOutput})
    def get(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        return Response(VolumeOutput(storage.get_volume(workspace, name)).data)

    @extend_schema(request=VolumeResizeInput, responses={200: VolumeOutput})
    def patch(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        body = VolumeResizeInput(data=request.data)
        body.is_valid(raise_exception=True)
        volume = storage.resize_volume(request.user, workspace, name, body.validated_data["size_gib"])
        return Response(VolumeOutput(volume).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        storage.delete_volume(request.user, workspace, name, backend=get_backend())
        return Response(status=status.HTTP_204_NO_CONTENT)


class UploadOutput(serializers.Serializer):
    volume = serializers.CharField()
    path = serializers.CharField()
    bytes = serializers.IntegerField()


class VolumeFilesApi(APIView):
    """Upload one file into the volume (multipart: `file`, and `path` inside the volume, default its name at
    the root). At most VOLUME_UPLOAD_MAX_BYTES; a path that leaves the volume is refused."""

    token_scopes = EVERYDAY
    parser_classes = [MultiPartParser]

    @extend_schema(request={"multipart/form-data": {"type": "object", "properties": {
        "file": {"type": "string", "format": "binary"}, "path": {"type": "string"}}}},
        responses={201: UploadOutput})
    def post(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": [gettext("a file is required (multipart field `file`)")]})
        path = request.data.get("path") or upload.name
        written = storage.upload_file(request.user, workspace, name, path, upload, upload.size)
        return Response({"volume": name, "path": written, "bytes": upload.size}, status=status.HTTP_201_CREATED)


# --------------------------------------------------------------------------- datasets


class DatasetVersionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    ref = serializers.SerializerMethodField(help_text="What a spec mounts: name@vN")
    source_volume = serializers.CharField()
    size_bytes = serializers.IntegerField()
    created = serializers.DateTimeField()

    def get_ref(self, version) -> str:
        return f"{version.dataset.name}@v{version.number}"


class DatasetOutput(serializers.Serializer):
    name = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug", help_text="The owner")
    versions = serializers.SerializerMethodField()
    shared_with = serializers.SerializerMethodField(help_text="Workspaces granted it (shown to its owner only)")

    def get_versions(self, dataset) -> list[dict]:
        return DatasetVersionOutput(sorted(dataset.versions.all(), key=lambda v: v.number), many=True).data

    def get_shared_with(self, dataset) -> list[str]:
        if dataset.workspace_id != self.context["workspace"].pk:
            return []
        return sorted(g.workspace.slug for g in dataset.grants.all())


class SnapshotInput(serializers.Serializer):
    volume = serializers.CharField(max_length=63)
    name = serializers.CharField(max_length=63, required=False, help_text="The dataset (default: the volume's name)")


class DatasetListApi(APIView):
    """The workspace's datasets and those shared with it; POST snapshots a volume into a new version."""

    token_scopes = EVERYDAY

    @extend_schema(responses={200: DatasetOutput(many=True)})
    def get(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        datasets = storage.visible_datasets(workspace).order_by("workspace__slug", "name")
        return Response(DatasetOutput(datasets, many=True, context={"workspace": workspace}).data)

    @extend_schema(request=SnapshotInput, responses={201: DatasetVersionOutput})
    def post(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        body = SnapshotInput(data=request.data)
        body.is_valid(raise_exception=True)
        version = storage.snapshot(request.user, workspace, body.validated_data["volume"],
                                   body.validated_data.get("name"), backend=get_backend())
        return Response(DatasetVersionOutput(version).data, status=status.HTTP_201_CREATED)


class DatasetVersionApi(APIView):
    """DELETE a version of the workspace's own dataset (refused while a live job mounts it)."""

    token_scopes = EVERYDAY

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name, number):
        workspace = get_workspace_for_user(request.user, slug)
        storage.delete_version(request.user, workspace, name, number, backend=get_backend())
        return Response(status=status.HTTP_204_NO_CONTENT)


class GrantInput(serializers.Serializer):
    workspace = serializers.SlugField(help_text="The workspace that may mount it, read-only")


class DatasetGrantsApi(APIView):
    """POST shares the dataset with another workspace (an owner's action)."""

    @extend_schema(request=GrantInput, responses={201: GrantInput})
    def post(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        body = GrantInput(data=request.data)
        body.is_valid(raise_exception=True)
        storage.grant(request.user, workspace, name, body.validated_data["workspace"])
        return Response({"workspace": body.validated_data["workspace"]}, status=status.HTTP_201_CREATED)


class DatasetGrantApi(APIView):
    """DELETE takes a grant back."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name, grantee):
        workspace = get_workspace_for_user(request.user, slug)
        storage.revoke(request.user, workspace, name, grantee, backend=get_backend())
        return Response(status=status.HTTP_204_NO_CONTENT)
