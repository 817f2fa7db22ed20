"""Jobs API: thin views over scheduling.services and scheduling.selectors."""

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.metering.costs import job_cost
from billing.services import BudgetBlocked, submit_quoted_job
from portal.selectors import get_workspace_for_user
from scheduling import selectors, services
from scheduling.models import JobState
from scheduling.spec import SpecError, spec_to_yaml


def spec_errors_response(error: SpecError) -> Response:
    return Response({"errors": error.to_dicts()}, status=status.HTTP_400_BAD_REQUEST)


def message_error(field: str, message: str, code=status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({"errors": [{"line": None, "column": None, "field": field, "message": message}]},
                    status=code)


def input_errors_response(body: serializers.Serializer) -> Response:
    """A body that does not have the right shape, in the same error format as spec errors."""
    return Response({"errors": [
        {"line": None, "column": None, "field": field, "message": " ".join(str(m) for m in messages)}
        for field, messages in body.errors.items()
    ]}, status=status.HTTP_400_BAD_REQUEST)


class ReplicaOutput(serializers.Serializer):
    role = serializers.CharField()
    index = serializers.IntegerField()
    state = serializers.CharField()
    node = serializers.CharField(source="node.name", default=None)
    gpus = serializers.JSONField(source="gpu_indices")
    slice = serializers.JSONField()
    slice_label = serializers.CharField()
    started = serializers.DateTimeField()
    ended = serializers.DateTimeField()


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    queue = serializers.CharField(source="queue.name")
    state = serializers.CharField()
    pending_reason = serializers.CharField()
    type = serializers.CharField(source="job_type")
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
    started = serializers.DateTimeField()
    finished = serializers.DateTimeField()


class EventOutput(serializers.Serializer):
    time = serializers.DateTimeField()
    kind = serializers.CharField()
    state = serializers.CharField()
    reason = serializers.CharField()
    data = serializers.JSONField()


class JobSubmitInput(serializers.Serializer):
    workspace = serializers.SlugField()
    spec = serializers.JSONField(help_text="The task YAML as text, or a JSON object of the same fields")
    option = serializers.CharField(required=False, allow_blank=True)

    def validate_spec(self, value):
        if not isinstance(value, (str, dict)):
            raise ValidationError("spec must be YAML text or a JSON object")
        return value


class JobListCreateApi(ListAPIView):
    serializer_class = JobOutput

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
        return selectors.jobs_for(self.request.user, workspace=workspace, state=state)

    @extend_schema(request=JobSubmitInput, responses={201: JobOutput})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        if not body.is_valid():
            return input_errors_response(body)
        data = body.validated_data
        workspace = get_workspace_for_user(request.user, data["workspace"])
        try:
            job = submit_quoted_job(user=request.user, workspace=workspace, spec=data["spec"],
                                    option=data.get("option"))
        except SpecError as error:
            return spec_errors_response(error)
        except BudgetBlocked as blocked:
            return message_error("budget", str(blocked), status.HTTP_403_FORBIDDEN)
        except PermissionDenied as denied:
            return message_error("workspace", str(denied), status.HTTP_403_FORBIDDEN)
        except ValueError as error:  # QuoteError (nothing fits) or an unknown option id
            return message_error("option", str(error))
        return Response(JobOutput(job).data, status=status.HTTP_201_CREATED)


class JobDetailOutput(JobOutput):
    cost_so_far = serializers.SerializerMethodField()

    def get_cost_so_far(self, job) -> str | None:
        """What the job has cost until now while it runs (the final cost once it ended)."""
        if job.is_final or not job.started:
            return None
        return str(job_cost(job).total)


class JobDetailApi(RetrieveAPIView):
    serializer_class = JobDetailOutput

    def get_object(self):
        return selectors.get_job_for_user(self.request.user, self.kwargs["pk"])


class JobEventsApi(ListAPIView):
    serializer_class = EventOutput
    pagination_class = None

    def get_queryset(self):
        return selectors.events_of(selectors.get_job_for_user(self.request.user, self.kwargs["pk"]))


class JobCancelApi(APIView):
    @extend_schema(request=None, responses={200: JobOutput})
    def post(self, request, pk):
        job = selectors.get_job_for_user(request.user, pk)
        try:
            job = services.cancel_job(user=request.user, job=job)
        except PermissionDenied as denied:
            return message_error("job", str(denied), status.HTTP_403_FORBIDDEN)
        except ValueError as error:
            return message_error("state", str(error), status.HTTP_409_CONFLICT)
        return Response(JobOutput(selectors.get_job_for_user(request.user, job.pk)).data)


class ImageFormInput(serializers.Serializer):
    workspace = serializers.SlugField()
    form = serializers.DictField(child=serializers.JSONField(), help_text="Image form fields (image, gpus, ...)")


class ImageFormApi(APIView):
    """The image form turned into the spec YAML it corresponds to (shown on the submit page)."""

    @extend_schema(request=ImageFormInput, responses={200: dict})
    def post(self, request):
        body = ImageFormInput(data=request.data)
        if not body.is_valid():
            return input_errors_response(body)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        try:
            spec = services.spec_from_form(workspace, body.validated_data["form"])
        except SpecError as error:
            return spec_errors_response(error)
        return Response({"yaml": spec_to_yaml(spec)})
