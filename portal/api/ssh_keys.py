"""The caller's SSH keys for the gateway: list, add (ed25519 or RSA of at least 3,072 bits), delete. Thin views
over portal.ssh_keys; a bad key is a problem answer on `public_key`, and nothing is stored."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import ssh_access, ssh_keys


class SshKeyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField(source="key_type")
    public_key = serializers.CharField()
    fingerprint = serializers.CharField(help_text="SHA256:…, as ssh-keygen -l shows it")
    created = serializers.DateTimeField()
    last_used = serializers.DateTimeField(allow_null=True)


class SshKeyInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, allow_blank=True)  # a blank one: the service's 422
    public_key = serializers.CharField(max_length=ssh_keys.MAX_KEY_TEXT, trim_whitespace=True, allow_blank=True,
                                       help_text="One OpenSSH line: ssh-ed25519 AAAA… or ssh-rsa AAAA… (≥3072 bits)")


class SshKeyListApi(APIView):
    token_scopes = {"POST": "submit"}

    @extend_schema(responses={200: SshKeyOutput(many=True)})
    def get(self, request):
        return Response(SshKeyOutput(ssh_keys.keys_of(request.user), many=True).data)

    @extend_schema(request=SshKeyInput, responses={201: SshKeyOutput})
    def post(self, request):
        given = SshKeyInput(data=request.data)
        given.is_valid(raise_exception=True)
        key = ssh_keys.add_key(request.user, given.validated_data["name"], given.validated_data["public_key"])
        return Response(SshKeyOutput(key).data, status=status.HTTP_201_CREATED)


class SshKeyDetailApi(APIView):
    token_scopes = {"DELETE": "submit"}

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, key_id):
        if not ssh_keys.delete_key(request.user, key_id):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)


class SshGatewayOutput(serializers.Serializer):
    host = serializers.CharField(help_text="The host users connect to (SSH_GATEWAY_HOST)")
    port = serializers.IntegerField()
    host_key_fingerprint = serializers.CharField(help_text="SHA256:…; empty before the gateway first started")


class SshGatewayApi(APIView):
    """Where the SSH gateway answers and its host key's fingerprint (gpuctl ssh and ssh-config read it)."""

    @extend_schema(responses={200: SshGatewayOutput})
    def get(self, request):
        return Response(SshGatewayOutput({"host": settings.SSH_GATEWAY_HOST, "port": settings.SSH_GATEWAY_PORT,
                                          "host_key_fingerprint": ssh_access.host_fingerprint()}).data)
