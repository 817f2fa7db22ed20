"""A workspace's invitations over the API, owners only: invite an e-mail with a role (the link is e-mailed,
never answered), list the pending ones, resend one (a new link and expiry), revoke one. Thin views over
portal.invitations."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import invitations
from portal.models import Role
from portal.selectors import get_workspace_for_user


class InvitationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    role = serializers.CharField()
    invited_by = serializers.SerializerMethodField(help_text="The owner who invited")
    created = serializers.DateTimeField()
    sent = serializers.DateTimeField(help_text="The latest e-mail (the first, or a resend)")
    expires = serializers.DateTimeField(help_text="The link is refused from then on")

    def get_invited_by(self, invitation) -> str | None:
        return invitation.invited_by.username if invitation.invited_by else None


class InvitationInput(serializers.Serializer):
    email = serializers.EmailField(max_length=254)
    role = serializers.ChoiceField(choices=Role.values, default=Role.MEMBER)


def _owned(request, slug):
    workspace = get_workspace_for_user(request.user, slug)  # 404 for anyone outside it
    invitations.require_owner(request.user, workspace)  # 403 for members, viewers, finance
    return workspace


def _base_url(request) -> str:
    return request.build_absolute_uri("/")


class InvitationListApi(APIView):
    """The workspace's pending invitations; POST invites an e-mail with a role and sends the link (owners)."""

    @extend_schema(responses={200: InvitationOutput(many=True)})
    def get(self, request, slug):
        workspace = _owned(request, slug)
        return Response(InvitationOutput(invitations.pending_of(workspace), many=True).data)

    @extend_schema(request=InvitationInput, responses={201: InvitationOutput})
    def post(self, request, slug):
        workspace = _owned(request, slug)
        given = InvitationInput(data=request.data)
        given.is_valid(raise_exception=True)
        invitation = invitations.invite(request.user, workspace, given.validated_data["email"],
                                        given.validated_data["role"], base_url=_base_url(request))
        return Response(InvitationOutput(invitation).data, status=status.HTTP_201_CREATED)


class InvitationDetailApi(APIView):
    """DELETE revokes a pending invitation: its link stops working (owners)."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, slug, invitation_id):
        workspace = _owned(request, slug)
        invitations.revoke(request.user, workspace, invitation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationResendApi(APIView):
    """A new link, valid seven days from now, e-mailed again; the old link stops working (owners)."""

    @extend_schema(request=None, responses={200: InvitationOutput})
    def post(self, request, slug, invitation_id):
        workspace = _owned(request, slug)
        invitation = invitations.resend(request.user, workspace, invitation_id, base_url=_base_url(request))
        return Response(InvitationOutput(invitation).data)
