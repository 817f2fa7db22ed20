"""Jobs API: thin views over scheduling.services and scheduling.selectors."""


from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotAcceptable, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import job_total, submit_quoted_job
from portal import selectors as portal_selectors
from portal.api.fields import DurationHoursField, SpecField
from portal.api.outlook import PendingOutlookOutput
from portal.selectors import get_workspace_for_user
from scheduling.api import (
    checkpoint_fields,
    get_backend,
    grace_of,
    job_reason,
    logs,
    lost_of,
    selectors,
    services,
    spec_to_yaml,
)
from scheduling.models import JobState


class ReplicaOutput(serializers.Serializer):
    role = serializers.CharField()
    index = serializers.IntegerField()
    state = serializers.CharField()
    node = serializers.CharField(source="node.name", default=None, allow_null=True)
    gpus = serializers.JSONField(source="gpu_indices")
    slice = serializers.JSONField()
    slice_label = serializers.CharField()
    started = serializers.DateTimeField(allow_null=True)
    ended = serializers.DateTimeField(allow_null=True)
    lost_gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=4, read_only=True,
                                              help_text="GPU-hours of work its eviction lost (0 if not evicted)")


class CheckpointOutput(serializers.Serializer):
    path = serializers.CharField()
    volume = serializers.CharField(allow_null=True, help_text="the workspace volume it saves to; null: the job's own")
    every_s = serializers.IntegerField(allow_null=True, help_text="seconds between checkpoints; null: not known")
    resumable = serializers.BooleanField(help_text="a new attempt resumes from the last checkpoint")


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    queue = serializers.CharField(source="queue.name")
    state = serializers.CharField()
    pending_reason = serializers.CharField()
    pending_reason_text = serializers.SerializerMethodField(
        help_text="pending_reason in the request's language (Accept-Language or the user's choice)")
    pending_code = serializers.CharField(read_only=True)
    pending_params = serializers.JSONField(read_only=True)
    type = serializers.CharField(source="job_type")
    kind = serializers.CharField(help_text="training, notebook or inference")
    priority = serializers.IntegerField()
    preemptible = serializers.BooleanField()
    reduce_cost = serializers.BooleanField()
    expected_duration_s = serializers.IntegerField()
    replicas = ReplicaOutput(many=True)
    quote = serializers.JSONField()
    final_cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
    currency = serializers.CharField()
    spec = serializers.JSONField()
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)
    termination_grace_s = serializers.SerializerMethodField(
        help_text="terminationGracePeriod: seconds between SIGTERM and the kill when it is evicted")
    checkpoint = serializers.SerializerMethodField()
    lost_gpu_hours = serializers.SerializerMethodField(
        help_text="GPU-hours lost to its evictions: the work since each evicted replica's last checkpoint")

    @extend_schema_field(OpenApiTypes.INT)
    def get_termination_grace_s(self, job) -> int:
        return grace_of(job.spec)

    @extend_schema_field(CheckpointOutput(allow_null=True))
    def get_checkpoint(self, job) -> dict | None:
        return checkpoint_fields(job)

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=4))
    def get_lost_gpu_hours(self, job) -> str:
        return str(lost_of(job.replicas.all()))

    @extend_schema_field(OpenApiTypes.STR)
    def get_pending_reason_text(self, job) -> str:
        return job_reason(job) if job.pending_reason or job.pending_code else ""


class EventOutput(serializers.Serializer):
    time = serializers.DateTimeField()
    kind = serializers.CharField()
    kind_text = serializers.CharField(source="kind_label", read_only=True,
                                      help_text="kind in the request's language (Accept-Language)")
    state = serializers.CharField()
    reason = serializers.CharField(help_text="In English, as recorded")
    reason_text = serializers.CharField(read_only=True,
                                        help_text="reason in the request's language (Accept-Language); the "
                                                  "recorded text for events from before it was kept")
    data = serializers.JSONField()


class JobSubmitInput(serializers.Serializer):
    workspace = serializers.SlugField()
    spec = SpecField(help_text="The task YAML as text, or a JSON object of the same fields")
    option = serializers.CharField(required=False, allow_blank=True)
    duration_hours = DurationHoursField(
        required=False,
        help_text="How long the job runs, in hours: the quote's totals are for it and the job is scheduled for it "
                  "(default: the spec's expectedDuration, else 2)")


class JobListCreateApi(ListAPIView):
    serializer_class = JobOutput
    token_scopes = {"POST": "submit"}
    filter_params = ("workspace", "state")

    @extend_schema(parameters=[
        OpenApiParameter("workspace", str, description="a workspace slug (default: all of mine)"),
        OpenApiParameter("state", str, enum=JobState.values),
    ])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        workspace = get_workspace_for_user(self.request.user, params["workspace"]) if params.get("workspace") else None
        state = params.get("state")
        if state and state not in JobState.values:
            raise ValidationError({"state": f"unknown state {state!r}; one of {', '.join(JobState.values)}"})
        return portal_selectors.jobs_for(self.request.user, workspace=workspace, state=state)

    @extend_schema(request=JobSubmitInput, responses={201: JobOutput})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        workspace = get_workspace_for_user(request.user, data["workspace"])
        job = submit_quoted_job(user=request.user, workspace=workspace, spec=data["spec"], option=data.get("option"),
                                duration_hours=data.get("duration_hours"))
        return Response(JobOutput(job).data, status=status.HTTP_201_CREATED)


class JobDetailOutput(JobOutput, PendingOutlookOutput):
    cost_so_far = serializers.SerializerMethodField()

    def get_cost_so_far(self, job) -> str | None:
        """What the job has cost until now while it runs (the final cost once it ended)."""
        if job.is_final or not job.started:
            return None
        return str(job_total(job.pk))


class JobDetailApi(RetrieveAPIView):
    serializer_class = JobDetailOutput

    def get_object(self):
        return portal_selectors.get_job_for_user(self.request.user, self.kwargs["pk"])


class JobEventsApi(ListAPIView):
    serializer_class = EventOutput
    pagination_class = None

    def get_queryset(self):
        return selectors.events_of(portal_selectors.get_job_for_user(self.request.user, self.kwargs["pk"]))


class JobCancelApi(APIView):
    token_scopes = {"POST": "submit"}

    @extend_schema(request=None, responses={200: JobOutput})
    def post(self, request, pk):
        job = services.cancel_job(user=request.user, job=portal_selectors.get_job_for_user(request.user, pk))
        return Response(JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data)


class ImageFormInput(serializers.Serializer):
    workspace = serializers.SlugField()
    # null, like a blank field, means the field's default
    form = serializers.DictField(child=serializers.JSONField(allow_null=True),
                                 help_text="Image form fields (image, gpus, ...); null or blank: the default")


class ImageFormApi(APIView):
    """The image form turned into the spec YAML it corresponds to (shown on the submit page)."""

    token_scopes = {"POST": "read"}  # changes nothing

    @extend_schema(request=ImageFormInput, responses={200: dict})
    def post(self, request):
        body = ImageFormInput(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        spec = services.spec_from_form(workspace, body.validated_data["form"])
        return Response({"yaml": spec_to_yaml(spec)})


class AnyAccept(DefaultContentNegotiation):
    """The log is text/plain whatever was asked for; problem details stay JSON, even to a caller that
    asked for text only (rather than a 406)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type


class JobLogsQuery(serializers.Serializer):
    replica = serializers.RegexField(logs.REPLICA_NAME_PATTERN, max_length=70, required=False, trim_whitespace=False,
                                     error_messages={"invalid": "not a replica name such as worker-0"},
                                     help_text="One replica, `{role}-{index}` (e.g. worker-0); without it, all")
    follow = serializers.ChoiceField(choices=["0", "1"], default="0",
                                     help_text="1: keep streaming new lines while the job runs")


class JobLogsApi(APIView):
    """The job's replica logs as text: live while a replica runs, the stored copy after it ended."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = AnyAccept

    @extend_schema(parameters=[JobLogsQuery], responses={(200, "text/plain"): OpenApiResponse(
        OpenApiTypes.STR, description="Each replica's log after a `== worker-0 on NODE` line (none when one "
                                      "replica is asked for); with follow=1 a stream that ends when the job "
                                      "stops running")})
    def get(self, request, pk):
        # A plain dict: an empty value is refused, where a form would take it as unset.
        query = JobLogsQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        job = portal_selectors.get_job_for_user(request.user, pk)
        replica = logs.check_replica(job, query.validated_data.get("replica"))
        if query.validated_data["follow"] == "0":
            return HttpResponse(logs.job_log_text(job, get_backend(), replica), content_type=logs.TEXT_PLAIN)
        # An ASGI server would read a synchronous stream whole before sending any of it.
        follow = logs.follow_async if isinstance(request._request, ASGIRequest) else logs.follow
        response = StreamingHttpResponse(follow(job, get_backend(), replica), content_type=logs.TEXT_PLAIN)
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # proxies pass each line on as it comes
        return response
