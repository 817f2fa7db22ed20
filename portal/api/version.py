"""What is running: the release to anyone (a load balancer or an upgrade script asks before signing
in), the commit and the database schema to a signed-in caller only (they tell an attacker which fixes
are missing, more precisely than the release does)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import version


class VersionOutput(serializers.Serializer):
    version = serializers.CharField(allow_null=True, help_text="The release (pyproject's version), e.g. 0.2.0")
    commit = serializers.CharField(required=False, allow_null=True,
                                   help_text="Signed in only: the git commit it was built from; null if unknown")
    schema = serializers.DictField(child=serializers.CharField(allow_null=True), required=False,
                                   help_text="Signed in only: each installed app's latest applied migration (the project's, Django's, allauth's)")
    pending_migrations = serializers.ListField(child=serializers.CharField(), required=False,
                                               help_text="Signed in only: migrations in the code not applied yet "
                                                         "(app.name); empty once `manage.py migrate` has run")


class VersionApi(APIView):
    """The release running. Without credentials only `version`; signed in (a token of any scope or a
    session), also the commit, the schema and the migrations not applied yet."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: VersionOutput})
    def get(self, request):
        out = {"version": version.version()}
        if request.user and request.user.is_authenticated:
            out |= {"commit": version.commit(), "schema": version.schema(),
                    "pending_migrations": version.pending_migrations()}
        return Response(out)
