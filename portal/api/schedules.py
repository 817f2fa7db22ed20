"""Schedules over the API: make one from a spec with `schedule:`, list, detail (its runs and latest fire times),
suspend, resume, trigger a run now, delete. Thin views over scheduling's schedules; a schedule is reached only by
its workspace's members (404 for anyone else). Times are UTC, as everywhere in the API."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import submit_quoted_schedule
from portal import selectors as portal_selectors
from portal.api.jobs import JobOutput, JobSubmitInput
from portal.selectors import get_workspace_for_user
from scheduling.api import schedules
from scheduling.models import FiringOutcome

EVERYDAY = {"POST": "submit", "DELETE": "submit"}
UPCOMING = 3


class ScheduleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    cron = serializers.CharField()
    time_zone = serializers.CharField(help_text="The IANA zone the cron line is read in")
    concurrency = serializers.CharField(help_text="Forbid, Replace or Allow")
    keep_last = serializers.IntegerField(help_text="How many finished runs the schedule lists")
    suspended = serializers.BooleanField()
    next_fire_at = serializers.DateTimeField(allow_null=True, help_text="null while suspended")
    next_fire_times = serializers.SerializerMethodField(
        help_text="The next fire times (UTC); none while suspended"
    )
    created = serializers.DateTimeField()
    created_by = serializers.CharField(
        source="created_by.username",
        default=None,
        allow_null=True,
        help_text="Runs made at fire times are submitted as this user",
    )
    spec = serializers.JSONField(help_text="Each run's spec (without the schedule block)")
    quote = serializers.JSONField(help_text="The quote option each run is made with")

    @extend_schema_field(serializers.ListField(child=serializers.DateTimeField()))
    def get_next_fire_times(self, schedule) -> list[str]:
        field = serializers.DateTimeField()
        return [field.to_representation(at) for at in schedules.upcoming(schedule, UPCOMING)]


class RunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.CharField()
    queue = serializers.CharField(source="queue.name")
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)


class FiringOutput(serializers.Serializer):
    fire_time = serializers.DateTimeField()
    outcome = serializers.ChoiceField(choices=FiringOutcome.values)
    outcome_text = serializers.SerializerMethodField(help_text="outcome in the request's language")
    job = serializers.IntegerField(
        source="job_id",
        allow_null=True,
        help_text="The run made, or the unfinished run a Forbid skip waited for",
    )
    detail = serializers.CharField(help_text="Why a run was refused")

    @extend_schema_field(OpenApiTypes.STR)
    def get_outcome_text(self, firing) -> str:
        return str(firing.get_outcome_display())


class ScheduleDetailOutput(ScheduleOutput):
    runs = serializers.SerializerMethodField(
        help_text="Unfinished runs, then the last keep_last finished ones"
    )
    firings = serializers.SerializerMethodField(help_text="The latest fire times and what became of each")

    @extend_schema_field(RunOutput(many=True))
    def get_runs(self, schedule) -> list[dict]:
        return RunOutput(schedules.runs_of(schedule), many=True).data

    @extend_schema_field(FiringOutput(many=True))
    def get_firings(self, schedule) -> list[dict]:
        return FiringOutput(schedules.firings_of(schedule), many=True).data


class ScheduleListCreateApi(ListAPIView):
    """The schedules of my workspaces; POST makes one from a spec with a `schedule` block (quoted as one run;
    the option chosen is frozen for every run)."""

    serializer_class = ScheduleOutput
    token_scopes = {"POST": "submit"}
    filter_params = ("workspace",)

    @extend_schema(
        parameters=[OpenApiParameter("workspace", str, description="a workspace slug (default: all of mine)")]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        slug = self.request.query_params.get("workspace")
        workspace = get_workspace_for_user(self.request.user, slug) if slug else None
        return portal_selectors.schedules_for(self.request.user, workspace=workspace)

    @extend_schema(request=JobSubmitInput, responses={201: ScheduleDetailOutput})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        workspace = get_workspace_for_user(request.user, data["workspace"])
        schedule = submit_quoted_schedule(
            user=request.user,
            workspace=workspace,
            spec=data["spec"],
            option=data.get("option"),
            duration_hours=data.get("duration_hours"),
        )
        return Response(ScheduleDetailOutput(schedule).data, status=status.HTTP_201_CREATED)


class ScheduleDetailApi(APIView):
    """One schedule with its runs and latest fire times; DELETE deletes it (its runs stay jobs of the workspace)."""

    token_scopes = EVERYDAY

    @extend_schema(responses={200: ScheduleDetailOutput})
    def get(self, request, pk):
        return Response(ScheduleDetailOutput(portal_selectors.get_schedule_for_user(request.user, pk)).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk):
        schedules.delete_schedule(
            user=request.user, schedule=portal_selectors.get_schedule_for_user(request.user, pk)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class _ScheduleStateApi(APIView):
    """A schedule's suspend or resume: `change` is the service that does it."""

    token_scopes = EVERYDAY
    change = None

    @extend_schema(request=None, responses={200: ScheduleOutput})
    def post(self, request, pk):
        schedule = portal_selectors.get_schedule_for_user(request.user, pk)
        return Response(ScheduleOutput(self.change(user=request.user, schedule=schedule)).data)


class ScheduleSuspendApi(_ScheduleStateApi):
    """No runs until resumed (runs already made go on)."""

    change = staticmethod(schedules.suspend_schedule)


class ScheduleResumeApi(_ScheduleStateApi):
    """Fire again from now on (fire times passed while suspended are not caught up)."""

    change = staticmethod(schedules.resume_schedule)


class ScheduleTriggerApi(APIView):
    """A run now, submitted by me (409 while a run is unfinished and the concurrency is Forbid)."""

    token_scopes = EVERYDAY

    @extend_schema(request=None, responses={201: JobOutput})
    def post(self, request, pk):
        schedule = portal_selectors.get_schedule_for_user(request.user, pk)
        job = schedules.trigger_schedule(user=request.user, schedule=schedule)
        return Response(
            JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data,
            status=status.HTTP_201_CREATED,
        )
