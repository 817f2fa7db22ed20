"""A workspace's S3-compatible buckets over the API: any member lists them and their objects; an owner
registers one (its credentials are two of the workspace's secrets, named, never a value) and deletes one.
Thin views over scheduling's buckets services; a workspace is reached only by its members (404 otherwise)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.secrets import services
from portal.selectors import get_workspace_for_user
from scheduling.api import buckets, secrets


class BucketOutput(serializers.Serializer):
    name = serializers.CharField()
    endpoint = serializers.CharField()
    bucket = serializers.CharField()
    prefix = serializers.CharField()
    region = serializers.CharField()
    credentials = serializers.SerializerMethodField(help_text="The secrets that hold them, by name")
    created = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by_name")

    def get_credentials(self, row) -> dict:
        return {"accessKeyId": {"secret": row.access_key_id_secret},
                "secretAccessKey": {"secret": row.secret_access_key_secret}}


class SecretRef(serializers.Serializer):
    secret = serializers.CharField(max_length=63, help_text="The name of one of the workspace's secrets")


class CredentialsInput(serializers.Serializer):
    accessKeyId = SecretRef()  # noqa: N815 (the spec's spelling)
    secretAccessKey = SecretRef()  # noqa: N815


class BucketInput(serializers.Serializer):
    name = serializers.CharField(max_length=63, help_text="What a spec's `buckets` names, e.g. raw-data")
    endpoint = serializers.CharField(max_length=buckets.MAX_ENDPOINT, help_text="https://s3.example.com")
    bucket = serializers.CharField(max_length=63)
    prefix = serializers.CharField(max_length=buckets.MAX_PREFIX, required=False, allow_blank=True, default="")
    region = serializers.CharField(max_length=32, required=False, default=buckets.DEFAULT_REGION)
    credentials = CredentialsInput()


class ObjectOutput(serializers.Serializer):
    key = serializers.CharField()
    size = serializers.IntegerField()
    last_modified = serializers.CharField()


class BucketListApi(APIView):
    """The workspace's buckets; POST registers one (owners)."""

    @extend_schema(responses={200: BucketOutput(many=True)})
    def get(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        return Response(BucketOutput(buckets.buckets_of(workspace), many=True).data)

    @extend_schema(request=BucketInput, responses={201: BucketOutput})
    def post(self, request, slug):
        workspace = get_workspace_for_user(request.user, slug)
        secrets.require_owner(request.user, workspace)
        body = BucketInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        credentials = data.pop("credentials")
        row = services.add_bucket(request.user, workspace, **data,
                                 access_key_id=credentials["accessKeyId"]["secret"],
                                 secret_access_key=credentials["secretAccessKey"]["secret"])
        return Response(BucketOutput(row).data, status=status.HTTP_201_CREATED)


class BucketDetailApi(APIView):
    """One bucket; DELETE removes it (owners; refused while a live job reads it). Its objects stay in the store."""

    @extend_schema(responses={200: BucketOutput})
    def get(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        return Response(BucketOutput(buckets.get_bucket(workspace, name)).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        services.delete_bucket(request.user, workspace, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BucketObjectsApi(APIView):
    """The objects under the bucket's prefix (and `prefix` within it), the first 1000 by key, as the platform
    reads them from the store with the bucket's credentials."""

    @extend_schema(parameters=[OpenApiParameter("prefix", str, required=False)],
                   responses={200: ObjectOutput(many=True)})
    def get(self, request, slug, name):
        workspace = get_workspace_for_user(request.user, slug)
        found = buckets.list_objects(workspace, name, request.query_params.get("prefix", ""))
        return Response(ObjectOutput(found, many=True).data)
