"""Inference services API: the caller's services with their replicas, traffic, latency and cost; one service
with its figures over time; change its replica range; delete it. Deploy one with POST /api/v1/jobs/ and
a `kind: inference` spec; stop and start with the jobs' stop and start. Thin views over portal.serving,
scheduling.inference and scheduling.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import selectors as portal_selectors
from portal import serving
from portal.api.jobs import JobOutput
from portal.api.notebooks import WorkloadListApi, WorkloadOutput
from portal.api.service_revisions import RevisionOutput
from scheduling.api import clock, inference, services


class ServiceOutput(WorkloadOutput):
    endpoint = serializers.SerializerMethodField(help_text="Call it with an API token that has the submit scope")
    min_replicas = serializers.IntegerField()
    max_replicas = serializers.IntegerField()
    desired_replicas = serializers.IntegerField(source="desired", help_text="What the autoscaler wants now")
    running_replicas = serializers.IntegerField(source="running")
    scale_reason = serializers.CharField()
    requests = serializers.IntegerField(help_text="Requests answered over its life")
    requests_per_second = serializers.FloatField(source="rps", allow_null=True, help_text="Over the last samples")
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    cold_starts = serializers.IntegerField()
    gpu_seconds = serializers.FloatField(help_text="GPU-seconds its replicas held")
    gpu_seconds_per_request = serializers.FloatField(allow_null=True)
    cost_so_far = serializers.DecimalField(source="row.cost", max_digits=14, decimal_places=2, allow_null=True)
    cost_per_1000_requests = serializers.DecimalField(source="cost_per_1000", max_digits=18, decimal_places=4,
                                                      allow_null=True)
    currency = serializers.CharField(source="row.currency")
    created = serializers.DateTimeField(source="job.created")
    # tokens served, metered by the endpoint from each answer's usage, and what they cost
    prompt_tokens = serializers.IntegerField(source="tokens.prompt_tokens", help_text="Input tokens served")
    completion_tokens = serializers.IntegerField(source="tokens.completion_tokens", help_text="Output tokens served")
    cost_per_million_prompt_tokens = serializers.DecimalField(
        source="tokens.cost_per_million_prompt_tokens", max_digits=18, decimal_places=4, allow_null=True,
        help_text="The ledger's cost of its held slices, the prefill seconds' part, per 1M input tokens")
    cost_per_million_completion_tokens = serializers.DecimalField(
        source="tokens.cost_per_million_completion_tokens", max_digits=18, decimal_places=4, allow_null=True,
        help_text="The decode seconds' part, per 1M output tokens")
    ttft_p50_s = serializers.FloatField(source="tokens.ttft_p50_s", allow_null=True, help_text="Time to first token")
    ttft_p95_s = serializers.FloatField(source="tokens.ttft_p95_s", allow_null=True)
    tokens_per_second = serializers.FloatField(source="tokens.tokens_per_second", allow_null=True,
                                               help_text="Output tokens per second of decoding")

    def get_endpoint(self, row) -> str:
        return self.context["request"].build_absolute_uri(row.endpoint)


class ServiceListApi(WorkloadListApi):
    """The caller's services that have not been deleted (in `workspace`, else in all the caller's workspaces)."""

    serializer_class = ServiceOutput

    def workloads(self, user, workspace):
        return serving.services_for(user, workspace, ended=False)

    def rows(self, page) -> list:
        return serving.service_rows(page, now=clock.now())


class ServiceSeriesOutput(serializers.Serializer):
    start = serializers.CharField()
    end = serializers.CharField()
    times = serializers.ListField(child=serializers.CharField())
    replicas = serializers.ListField(child=serializers.IntegerField())
    desired = serializers.ListField(child=serializers.IntegerField())
    rps = serializers.ListField(child=serializers.FloatField(allow_null=True))
    p50_ms = serializers.ListField(child=serializers.FloatField(allow_null=True))
    p95_ms = serializers.ListField(child=serializers.FloatField(allow_null=True))
    cost_times = serializers.ListField(child=serializers.CharField())
    cost = serializers.ListField(child=serializers.CharField(), help_text="Cost so far after each ledger line")
    currency = serializers.CharField()


class ServiceDetailOutput(ServiceOutput):
    series = serializers.SerializerMethodField()
    revisions = serializers.SerializerMethodField()

    def get_series(self, row) -> dict:
        return ServiceSeriesOutput(serving.service_series(row.job)).data

    @extend_schema_field(RevisionOutput(many=True))
    def get_revisions(self, row) -> list:
        return RevisionOutput(serving.revision_rows(row.job, row.row.cost), many=True).data


class ServiceDetailApi(APIView):
    """One service, with its figures over the last hours (one point per autoscaler evaluation)."""

    @extend_schema(responses={200: ServiceDetailOutput})
    def get(self, request, pk):
        [row] = serving.service_rows([serving.get_service_for_user(request.user, pk)])
        return Response(ServiceDetailOutput(row, context={"request": request}).data)


class ScaleInput(serializers.Serializer):
    min_replicas = serializers.IntegerField(min_value=0, max_value=inference.MAX_REPLICAS)
    max_replicas = serializers.IntegerField(min_value=1, max_value=inference.MAX_REPLICAS)


class ServiceScaleApi(APIView):
    """Change the service's replica range (min 0: it scales to zero when idle)."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=ScaleInput, responses={200: ServiceOutput})
    def post(self, request, pk):
        job = serving.get_service_for_user(request.user, pk)
        given = ScaleInput(data=request.data)
        given.is_valid(raise_exception=True)
        inference.set_range(request.user, job, given.validated_data["min_replicas"],
                            given.validated_data["max_replicas"])
        [row] = serving.service_rows([serving.get_service_for_user(request.user, pk)])
        return Response(ServiceOutput(row, context={"request": request}).data)


class ServiceDeleteApi(APIView):
    """Delete the service: its replicas end now (it is billed for what they held), its endpoint goes."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=None, responses={200: JobOutput})
    def post(self, request, pk):
        job = services.cancel_job(user=request.user, job=serving.get_service_for_user(request.user, pk))
        return Response(JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data)
