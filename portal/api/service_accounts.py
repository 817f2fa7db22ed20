"""A workspace's service accounts over the API, owners only: make one (name, role member or viewer), list,
delete; mint a token of one (its value answered once), list its tokens (never a value), revoke one. Thin
views over portal.service_accounts."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import service_accounts, services
from portal.models import TokenScope
from portal.selectors import get_workspace_for_user
from scheduling.api import DomainError


class ServiceAccountOutput(serializers.Serializer):
    name = serializers.CharField()
    username = serializers.CharField(source="user.username", help_text="How its jobs and audit lines name it")
    role = serializers.SerializerMethodField(help_text="member or viewer")
    created = serializers.DateTimeField()
    created_by = serializers.SerializerMethodField(help_text="The owner who made it")

    def get_role(self, account) -> str:
        return self.context["roles"].get(account.user_id, "")

    def get_created_by(self, account) -> str | None:
        return account.created_by.username if account.created_by else None


class ServiceAccountInput(serializers.Serializer):
    name = serializers.CharField(max_length=40, help_text="Lowercase letters, digits and '-', e.g. ci-pipeline")
    role = serializers.CharField(help_text="member or viewer (never owner)")


class TokenOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    hint = serializers.CharField(help_text="The first characters, to tell tokens apart")
    scope = serializers.CharField()
    created = serializers.DateTimeField()
    expires = serializers.DateTimeField(allow_null=True)
    last_used = serializers.DateTimeField(allow_null=True)
    revoked = serializers.DateTimeField(allow_null=True)


class NewTokenOutput(TokenOutput):
    token = serializers.CharField(help_text="The token itself: shown this once, never again")


class TokenInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scope = serializers.ChoiceField(choices=TokenScope.values, default=TokenScope.SUBMIT)
    expires_in_days = serializers.ChoiceField(choices=services.TOKEN_DAYS, default=services.DEFAULT_TOKEN_DAYS,
                                              help_text="The token's lifetime")


def _owned(request, slug):
    workspace = get_workspace_for_user(request.user, slug)  # 404 for anyone outside it
    service_accounts.require_owner(request.user, workspace)  # 403 for members, viewers, finance
    return workspace


def _listed(accounts) -> list:
    accounts = list(accounts)
    return ServiceAccountOutput(accounts, many=True, context={"roles": service_accounts.roles_of(accounts)}).data


class ServiceAccountListApi(APIView):
    """The workspace's service accounts; POST makes one (owners)."""

    @extend_schema(responses={200: ServiceAccountOutput(many=True)})
    def get(self, request, slug):
        workspace = _owned(request, slug)
        return Response(_listed(service_accounts.service_accounts_of(workspace)))

    @extend_schema(request=ServiceAccountInput, responses={201: ServiceAccountOutput})
    def post(self, request, slug):
        workspace = _owned(request, slug)
        given = ServiceAccountInput(data=request.data)
        given.is_valid(raise_exception=True)
        account = service_accounts.create_service_account(request.user, workspace, given.validated_data["name"],
                                                          given.validated_data["role"])
        return Response(_listed([account])[0], status=status.HTTP_201_CREATED)


class ServiceAccountDetailApi(APIView):
    """One service account; DELETE revokes its tokens and removes it (owners)."""

    @extend_schema(responses={200: ServiceAccountOutput})
    def get(self, request, slug, name):
        workspace = _owned(request, slug)
        return Response(_listed([service_accounts.get_service_account(workspace, name)])[0])

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name):
        workspace = _owned(request, slug)
        service_accounts.delete_service_account(request.user, workspace, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountTokenListApi(APIView):
    """A service account's tokens (never their values); POST mints one and answers its value once (owners)."""

    @extend_schema(responses={200: TokenOutput(many=True)})
    def get(self, request, slug, name):
        workspace = _owned(request, slug)
        account = service_accounts.get_service_account(workspace, name)
        return Response(TokenOutput(service_accounts.tokens_of(account), many=True).data)

    @extend_schema(request=TokenInput, responses={201: NewTokenOutput})
    def post(self, request, slug, name):
        workspace = _owned(request, slug)
        service_accounts.get_service_account(workspace, name)  # an unknown account is a 404 before the body
        given = TokenInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            token, raw = service_accounts.create_token(request.user, workspace, name, data["name"],
                                                       scope=data["scope"], days=data["expires_in_days"])
        except DomainError as error:  # the service names the lifetime "days"
            raise DomainError({"expires_in_days" if k == "days" else k: v for k, v in error.errors.items()}) from None
        answer = dict(TokenOutput(token).data, token=raw)
        return Response(answer, status=status.HTTP_201_CREATED)


class ServiceAccountTokenDetailApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, name, token_id):
        workspace = _owned(request, slug)
        service_accounts.revoke_token(request.user, workspace, name, token_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

