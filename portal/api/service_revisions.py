"""A service's revisions and traffic split: list and make revisions (a change of model or image), split the
requests between them, promote one, roll back. Thin views over scheduling.service_revisions; each answers
the service's revisions with their own tokens, latency and cost (portal.serving.revision_rows)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import serving
from scheduling.api import service_revisions


class RevisionOutput(serializers.Serializer):
    number = serializers.IntegerField()
    model = serializers.CharField()
    image = serializers.CharField()
    created = serializers.DateTimeField()
    current = serializers.BooleanField(help_text="New replicas launch it")
    percent = serializers.IntegerField(help_text="Of the requests now")
    replicas = serializers.IntegerField(help_text="Running")
    gpu_seconds = serializers.FloatField(help_text="Held by its placements")
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=4,
        allow_null=True,
        help_text="Its part of the service's ledger cost, by GPU-seconds held",
    )
    requests = serializers.IntegerField(help_text="Metered answers")
    ttft_mean_s = serializers.FloatField(allow_null=True, help_text="Mean time to first token of its answers")
    prompt_tokens = serializers.IntegerField(source="tokens.prompt_tokens")
    completion_tokens = serializers.IntegerField(source="tokens.completion_tokens")
    cost_per_million_prompt_tokens = serializers.DecimalField(
        source="tokens.cost_per_million_prompt_tokens", max_digits=18, decimal_places=4, allow_null=True
    )
    cost_per_million_completion_tokens = serializers.DecimalField(
        source="tokens.cost_per_million_completion_tokens", max_digits=18, decimal_places=4, allow_null=True
    )
    tokens_per_second = serializers.FloatField(source="tokens.tokens_per_second", allow_null=True)


class TrafficShare(serializers.Serializer):
    revision = serializers.IntegerField(min_value=1)
    percent = serializers.IntegerField(min_value=0, max_value=100)


class RevisionInput(serializers.Serializer):
    image = serializers.CharField(required=False, max_length=300)
    model = serializers.DictField(required=False, help_text="{path | registry, name}: as in the spec")
    command = serializers.ListField(child=serializers.CharField(), required=False)
    traffic = TrafficShare(
        many=True,
        required=False,
        help_text="Split the requests meanwhile, e.g. 90 % on the current revision and 10 % on the new one",
    )

    def validate(self, attrs):
        if not {"image", "model", "command"} & set(attrs):
            raise serializers.ValidationError("give the new image, model or command")
        return attrs


class TrafficInput(serializers.Serializer):
    traffic = TrafficShare(many=True)


class PromoteInput(serializers.Serializer):
    revision = serializers.IntegerField(min_value=1)


def _revisions(request, job) -> Response:
    [row] = serving.service_rows([serving.get_service_for_user(request.user, job.pk)])
    return Response(RevisionOutput(serving.revision_rows(row.job, row.row.cost), many=True).data)


class RevisionListApi(APIView):
    """The service's revisions, newest first; POST a new image, model or command to make the next one (the
    current one keeps serving until the new one has a ready replica)."""

    token_scopes = {"GET": "read", "POST": "submit"}

    @extend_schema(responses={200: RevisionOutput(many=True)})
    def get(self, request, pk):
        return _revisions(request, serving.get_service_for_user(request.user, pk))

    @extend_schema(request=RevisionInput, responses={201: RevisionOutput(many=True)})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = RevisionInput(data=request.data)
        given.is_valid(raise_exception=True)
        changes = dict(given.validated_data)
        traffic = changes.pop("traffic", None)
        service_revisions.create_revision(
            request.user, job, changes, traffic=None if traffic is None else [dict(t) for t in traffic]
        )
        answer = _revisions(request, job)
        answer.status_code = 201
        return answer


class TrafficApi(APIView):
    """Split the service's requests between its revisions: [{revision, percent}], the percents adding up to 100."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=TrafficInput, responses={200: RevisionOutput(many=True)})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = TrafficInput(data=request.data)
        given.is_valid(raise_exception=True)
        service_revisions.set_traffic(request.user, job, [dict(t) for t in given.validated_data["traffic"]])
        return _revisions(request, job)


class PromoteApi(APIView):
    """All the service's requests to one revision, which new replicas launch; the others are replaced once it
    has a ready replica."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=PromoteInput, responses={200: RevisionOutput(many=True)})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = PromoteInput(data=request.data)
        given.is_valid(raise_exception=True)
        service_revisions.promote(request.user, job, given.validated_data["revision"])
        return _revisions(request, job)


class RollbackApi(APIView):
    """Promote the revision before the current one."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=None, responses={200: RevisionOutput(many=True)})
    def post(self, request, pk):
        service_revisions.rollback(request.user, serving.get_service_for_user(request.user, pk))
        return _revisions(request, serving.get_service_for_user(request.user, pk))
