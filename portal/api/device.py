"""The device authorization grant (RFC 8628) of `gpuctl login`, without credentials: POST auth/device/ starts
one, POST auth/device/token/ polls it. The token endpoint answers as OAuth does (RFC 6749 5.2), a 400 with
`{"error", "error_description"}`, not problem details: OAuth clients read `error`. Thin views over
portal.device_login; rate-limited per client address (RATE_LIMITS["device"])."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from django.utils.http import urlencode
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import device_login
from portal.models import TokenScope
from scheduling.api import clock

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class DeviceStartInput(serializers.Serializer):
    client_id = serializers.ChoiceField(choices=device_login.CLIENTS, default="gpuctl")
    scope = serializers.ChoiceField(choices=TokenScope.values, default=TokenScope.SUBMIT,
                                    help_text="The scope of the token asked for")


class DeviceStartOutput(serializers.Serializer):
    device_code = serializers.CharField(help_text="The client's secret for polling; never shown to the person")
    user_code = serializers.CharField(help_text="What the person types at verification_uri, e.g. WDJB-MJHT")
    verification_uri = serializers.URLField()
    verification_uri_complete = serializers.URLField(help_text="verification_uri with the code filled in")
    expires_in = serializers.IntegerField(help_text="Seconds the codes work")
    interval = serializers.IntegerField(help_text="Seconds to wait between polls")


class Anonymous(APIView):
    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    parser_classes = [JSONParser]  # JSON, as the rest of the API (gpuctl sends JSON)


class DeviceStartApi(Anonymous):
    """Start a device sign-in: the person approves it at verification_uri, the client polls the token endpoint."""

    @extend_schema(request=DeviceStartInput, responses={200: DeviceStartOutput})
    def post(self, request):
        given = DeviceStartInput(data=request.data)
        given.is_valid(raise_exception=True)
        started = device_login.start(given.validated_data["client_id"], given.validated_data["scope"])
        page = (settings.PORTAL_URL.rstrip("/") + reverse("device") if settings.PORTAL_URL
                else request.build_absolute_uri(reverse("device")))
        return Response({
            "device_code": started.device_code, "user_code": started.user_code, "verification_uri": page,
            "verification_uri_complete": page + "?" + urlencode({"user_code": started.user_code}),
            "expires_in": device_login.EXPIRES_IN_S, "interval": started.authorization.interval,
        }, headers=NO_STORE)


class DeviceTokenApi(Anonymous):
    """Poll a device sign-in: 400 {"error": authorization_pending | slow_down | access_denied | expired_token |
    invalid_grant | unsupported_grant_type} until approved, then, once, an API token of the approving user."""

    @extend_schema(
        request=inline_serializer("DeviceTokenInput", {
            "device_code": serializers.CharField(),
            "grant_type": serializers.ChoiceField(choices=[device_login.GRANT_TYPE])}),
        responses={200: inline_serializer("DeviceTokenOutput", {
            "access_token": serializers.CharField(help_text="An API token gpt_..., answered this once"),
            "token_type": serializers.CharField(), "expires_in": serializers.IntegerField(),
            "scope": serializers.CharField(), "username": serializers.CharField(help_text="Whose token it is")}),
            400: inline_serializer("DeviceTokenError", {"error": serializers.CharField(),
                                                        "error_description": serializers.CharField()})})
    def post(self, request):
        try:
            data = request.data if isinstance(request.data, dict) else {}
            authorization, raw = device_login.exchange(data.get("device_code"), data.get("grant_type"))
        except ParseError:
            return Response({"error": "invalid_request", "error_description": "the body must be JSON"}, status=400,
                            headers=NO_STORE)
        except device_login.GrantError as error:
            return Response({"error": error.code, "error_description": error.description}, status=400,
                            headers=NO_STORE)
        token = authorization.token
        return Response({"access_token": raw, "token_type": "Bearer", "scope": token.scope,
                         "expires_in": int((token.expires - clock.now()).total_seconds()),
                         "username": authorization.user.username}, headers=NO_STORE)
