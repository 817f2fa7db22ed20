"""Jobs API: thin views over scheduling.services and scheduling.selectors."""


from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotAcceptable, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import (
    BatchSpec,
    array_total,
    currency_at,
    job_total,
    job_totals,
    submit_quoted_job,
    submit_quoted_jobs,
)
from portal import selectors as portal_selectors
from portal.api.errors import problem_body
from portal.api.fields import DurationHoursField, SpecField
from portal.api.job_rows import job_row
from portal.api.outlook import PendingOutlookOutput
from portal.selectors import get_workspace_for_user
from scheduling.api import (
    END_CODES,
    DomainError,
    array_detail,
    attempt_rows,
    checkpoint_fields,
    clock,
    deadlines,
    end_reason_text,
    get_backend,
    grace_of,
    has_ssh,
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
    ssh = serializers.SerializerMethodField(
        help_text="Whether its replicas run an SSH server that the SSH gateway reaches (its kind says)")
    priority = serializers.IntegerField()
    preemptible = serializers.BooleanField()
    reduce_cost = serializers.BooleanField()
    expected_duration_s = serializers.IntegerField()
    replicas = ReplicaOutput(many=True)
    quote = serializers.JSONField()
    final_cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
    currency = serializers.SerializerMethodField(
        help_text="The job's billing currency: fixed when it ends, before that the one it was quoted in")
    spec = serializers.JSONField()
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)
    schedule = serializers.IntegerField(source="schedule_id", allow_null=True, read_only=True,
                                        help_text="The schedule this job is a run of (/api/v1/schedules/{id}/); null: "
                                                  "submitted by hand")

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_ssh(self, job) -> bool:
        return has_ssh(job)

    @extend_schema_field(OpenApiTypes.STR)
    def get_currency(self, job) -> str:
        return job.currency or (job.quote or {}).get("currency") or currency_at(job.workspace, job.created)
    # dependencies and arrays
    after = serializers.JSONField(help_text='What it waits for: [{"job": id, "name": ..., "condition": '
                                            'succeeded | failed | finished}]')
    array_parent = serializers.IntegerField(source="array_parent_id", allow_null=True,
                                            help_text="An array index's parent job")
    array_index = serializers.IntegerField(allow_null=True, help_text="An array index's ARRAY_INDEX")
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


class JobListOutput(JobOutput):
    cost_so_far = serializers.SerializerMethodField(
        help_text="What a started, unfinished job has cost until now (null otherwise; final_cost once it ended)")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cost_so_far(self, job) -> str | None:
        if job.is_final or not job.started:
            return None
        total = self.context["running_totals"].get(job.pk)
        return str(total[0]) if total else "0.00"


class JobListCreateApi(ListAPIView):
    serializer_class = JobListOutput
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

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        # one ledger query for the page's running jobs, not one per job
        self.running_totals = job_totals(j.pk for j in page or () if j.started and not j.is_final)
        return page

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "running_totals": getattr(self, "running_totals", {})}

    def list(self, request, *args, **kwargs):
        # JobListOutput's JSON built as plain dicts (job_rows): the serializer's per-field walk was most of the CPU
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        if page is None:
            return super().list(request, *args, **kwargs)
        zone = timezone.get_current_timezone()
        return self.get_paginated_response([job_row(job, self.running_totals, zone) for job in page])

    @extend_schema(request=JobSubmitInput, responses={201: JobOutput})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        workspace = get_workspace_for_user(request.user, data["workspace"])
        job = submit_quoted_job(user=request.user, workspace=workspace, spec=data["spec"], option=data.get("option"),
                                duration_hours=data.get("duration_hours"))
        return Response(JobOutput(job).data, status=status.HTTP_201_CREATED)


MAX_BATCH = 1000   # jobs in one batch request: a body of 1,000 small specs stays well within the upload limit


class JobBatchItemInput(serializers.Serializer):
    spec = SpecField(help_text="The task YAML as text, or a JSON object of the same fields")
    option = serializers.CharField(required=False, allow_blank=True)
    duration_hours = DurationHoursField(required=False, help_text="As in POST /api/v1/jobs/")


class BatchItemsField(serializers.ListField):
    """The items as sent, any JSON: each is checked on its own (as JobBatchItemInput), so one malformed item is
    refused alone, in its result."""

    child = serializers.JSONField(allow_null=True)


@extend_schema_field({"allOf": [{"$ref": "#/components/schemas/ProblemDetail"}], "nullable": True})
class ProblemField(serializers.JSONField):
    pass


class JobBatchInput(serializers.Serializer):
    workspace = serializers.SlugField()
    jobs = BatchItemsField(min_length=1, max_length=MAX_BATCH,
                           help_text=f"Up to {MAX_BATCH} items, each {{spec, option?, duration_hours?}} as POST "
                                     "/api/v1/jobs/ takes it; an item that is not is refused in its result")


class BatchJobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    queue = serializers.CharField(source="queue.name")
    state = serializers.CharField()
    quote = serializers.JSONField(help_text="The option chosen, as POST /api/v1/jobs/ freezes it")


class JobBatchResultOutput(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's place in `jobs`, from 0")
    status = serializers.IntegerField(help_text="201: stored; else the problem's status")
    job = BatchJobOutput(required=False, allow_null=True, help_text="The stored job (null when refused)")
    problem = ProblemField(required=False, allow_null=True,
                                   help_text="Why the item was refused: RFC 9457 problem details (null when stored)")


class JobBatchOutput(serializers.Serializer):
    submitted = serializers.IntegerField()
    refused = serializers.IntegerField()
    results = JobBatchResultOutput(many=True)


class JobBatchApi(APIView):
    """Many jobs in one request (a sweep, an array by hand): each item quoted, checked and stored as POST
    /api/v1/jobs/ does, the good ones together; a refused item never keeps the others out."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=JobBatchInput, responses={200: JobBatchOutput})
    def post(self, request):
        body = JobBatchInput(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        checked: list[BatchSpec | DomainError] = []
        for raw in body.validated_data["jobs"]:
            item = JobBatchItemInput(data=raw) if isinstance(raw, dict) else None
            if item is None or not item.is_valid():
                checked.append(DomainError({k: [str(m) for m in v] for k, v in item.errors.items()} if item
                                           else gettext("each item is an object {spec, option?, duration_hours?}")))
                continue
            data = item.validated_data
            checked.append(BatchSpec(data["spec"], data.get("option") or None, data.get("duration_hours")))
        stored = iter(submit_quoted_jobs(user=request.user, workspace=workspace,
                                         items=[i for i in checked if isinstance(i, BatchSpec)]))
        results = []
        for index, item in enumerate(checked):
            outcome = next(stored) if isinstance(item, BatchSpec) else item
            if isinstance(outcome, DomainError):
                results.append({"index": index, "status": outcome.status, "job": None,
                                "problem": problem_body(outcome)})
            else:
                results.append({"index": index, "status": status.HTTP_201_CREATED,
                                "job": BatchJobOutput(outcome).data, "problem": None})
        submitted = sum(r["job"] is not None for r in results)
        return Response({"submitted": submitted, "refused": len(results) - submitted, "results": results})


class ArrayCountsOutput(serializers.Serializer):
    indices = serializers.CharField()
    parallelism = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Its indices by job state")
    total_cost = serializers.CharField(help_text="What its indices have cost so far")


class AttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(allow_null=True)
    vars()["class"] = serializers.CharField(allow_null=True, help_text=(   # a Python keyword as a field name
        "How it ended: succeeded, exit_code, oom, node_lost, preempted, cancelled or max_runtime_exceeded; "
        "null while it runs"))
    exit_code = serializers.IntegerField(allow_null=True)
    node = serializers.CharField()
    memory_mib = serializers.IntegerField(allow_null=True, help_text="The memory limit an OOM hit")
    counted = serializers.BooleanField(help_text="Counted against the spec's retry.limit")


class JobDetailOutput(JobOutput, PendingOutlookOutput):
    cost_so_far = serializers.SerializerMethodField()
    array = serializers.SerializerMethodField(help_text="An array's parent: its indices, parallelism and counts")

    @extend_schema_field(ArrayCountsOutput(allow_null=True))
    def get_array(self, job) -> dict | None:
        detail = array_detail(job)
        return None if detail is None else {**detail, "total_cost": str(array_total(job.pk))}

    max_runtime_s = serializers.IntegerField(allow_null=True, help_text="The limit of each run, in the job's time")
    deadline = serializers.DateTimeField(allow_null=True, help_text="When the run under way reaches max_runtime_s")
    complete_by = serializers.SerializerMethodField(help_text="completeBy / completeWithin: when it should be done")
    latest_start = serializers.SerializerMethodField(
        help_text="The deadline less its remaining expected run time and safety margin: from then on it starts "
                  "as strict work")
    deadline_phase = serializers.SerializerMethodField(
        help_text="gaps (waits for idle GPUs until latest_start), strict, running, done or missed; null: no deadline")
    deadline_missed = serializers.SerializerMethodField(
        help_text="When the platform found the deadline can no longer be met; null: not found")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_complete_by(self, job) -> str | None:
        return job.complete_by.isoformat() if job.complete_by else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_latest_start(self, job) -> str | None:
        return job.latest_start.isoformat() if job.complete_by and job.latest_start else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_deadline_phase(self, job) -> str | None:
        return deadlines.phase_of(job, clock.now()) if job.complete_by else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_deadline_missed(self, job) -> str | None:
        return job.deadline_missed.isoformat() if job.deadline_missed else None

    end_code = serializers.SerializerMethodField(help_text="How it ended: " + ", ".join(END_CODES) + "; null before")
    end_reason_text = serializers.SerializerMethodField(help_text="Why, in the request's language")
    attempts = serializers.SerializerMethodField()

    def get_end_code(self, job) -> str | None:
        return job.end_code or None

    def get_end_reason_text(self, job) -> str:
        return end_reason_text(job)

    @extend_schema_field(AttemptOutput(many=True))
    def get_attempts(self, job) -> list[dict]:
        return AttemptOutput(attempt_rows(job), many=True).data

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


class JobCancelInput(serializers.Serializer):
    index = serializers.IntegerField(required=False, min_value=0,
                                     help_text="Cancel only this index of an array (default: the whole job)")


class JobCancelApi(APIView):
    token_scopes = {"POST": "submit"}

    @extend_schema(request=JobCancelInput, responses={200: JobOutput})
    def post(self, request, pk):
        body = JobCancelInput(data=request.data)
        body.is_valid(raise_exception=True)
        job = portal_selectors.get_job_for_user(request.user, pk)
        index = body.validated_data.get("index")
        if index is None:
            job = services.cancel_job(user=request.user, job=job)
        else:   # one index of an array
            job = services.cancel_array_index(user=request.user, job=job, index=index)
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
