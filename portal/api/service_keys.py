"""A service's own API keys and its limits: list, make (the key's value answered once) and revoke keys;
set the service's requests and tokens per minute. Thin views over portal.service_keys and
scheduling.inference; the service is one of the caller's (else 404), a write needs a role that may submit."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import service_keys, serving
from scheduling.api import inference

LIMIT_HELP = "Empty or null: none (the service's own limit still applies)"


class ServiceKeyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    hint = serializers.CharField(help_text="The first characters, to tell keys apart")
    created = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    expires = serializers.DateTimeField(allow_null=True, help_text="Null: never")
    last_used = serializers.DateTimeField(allow_null=True)
    revoked = serializers.DateTimeField(allow_null=True)
    requests_per_minute = serializers.IntegerField(allow_null=True)
    tokens_per_minute = serializers.IntegerField(allow_null=True)


class NewServiceKeyOutput(ServiceKeyOutput):
    key = serializers.CharField(help_text="The key itself: shown this once, never again")


class ServiceKeyInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.ChoiceField(choices=service_keys.KEY_DAYS, default=90,
                                              help_text="0: it never expires")
    requests_per_minute = serializers.IntegerField(min_value=1, max_value=service_keys.MAX_REQUESTS_PER_MINUTE,
                                                   required=False, allow_null=True, help_text=LIMIT_HELP)
    tokens_per_minute = serializers.IntegerField(min_value=1, max_value=service_keys.MAX_TOKENS_PER_MINUTE,
                                                 required=False, allow_null=True, help_text=LIMIT_HELP)


class ServiceLimitsInput(serializers.Serializer):
    requests_per_minute = serializers.IntegerField(min_value=1, max_value=service_keys.MAX_REQUESTS_PER_MINUTE,
                                                   allow_null=True, help_text="Over all its callers; null: none")
    tokens_per_minute = serializers.IntegerField(min_value=1, max_value=service_keys.MAX_TOKENS_PER_MINUTE,
                                                 allow_null=True, help_text="Prompt and completion; null: none")


class ServiceKeyListApi(APIView):
    """The service's keys, revoked ones too (never their values); POST makes one and answers its value once."""

    token_scopes = {"POST": "submit"}

    @extend_schema(responses={200: ServiceKeyOutput(many=True)})
    def get(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        return Response(ServiceKeyOutput(service_keys.keys_of(job), many=True).data)

    @extend_schema(request=ServiceKeyInput, responses={201: NewServiceKeyOutput})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = ServiceKeyInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        key, raw = service_keys.create_key(request.user, job, data["name"], days=data["expires_in_days"],
                                           requests_per_minute=data.get("requests_per_minute"),
                                           tokens_per_minute=data.get("tokens_per_minute"))
        return Response(dict(ServiceKeyOutput(key).data, key=raw), status=status.HTTP_201_CREATED)


class ServiceKeyDetailApi(APIView):
    """Revoke one of the service's keys: refused from now on, an open stream ends at its next chunk."""

    token_scopes = {"DELETE": "submit"}

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk, key_id):
        job = serving.get_service_for_user(request.user, pk)
        service_keys.revoke_key(request.user, job, key_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceLimitsApi(APIView):
    """Set the service's requests and tokens per minute over all its callers (429 above them)."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=ServiceLimitsInput, responses={200: ServiceLimitsInput})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = ServiceLimitsInput(data=request.data)
        given.is_valid(raise_exception=True)
        scale = inference.set_limits(request.user, job, given.validated_data["requests_per_minute"],
                                     given.validated_data["tokens_per_minute"])
        return Response({"requests_per_minute": scale.requests_per_minute,
                         "tokens_per_minute": scale.tokens_per_minute})
