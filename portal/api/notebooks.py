"""Notebooks API: the caller's notebooks with their URL, idle time and costs; stop and start (notebooks and
services), delete a notebook. Thin views over portal.notebooks and scheduling.services."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import notebooks
from portal import selectors as portal_selectors
from portal.api.jobs import JobOutput
from scheduling.api import clock, get_backend, services


class WorkloadOutput(serializers.Serializer):
    """What a notebook and a service row share: the job it is."""

    id = serializers.IntegerField(source="job.pk")
    name = serializers.CharField(source="job.name")
    workspace = serializers.CharField(source="job.workspace.slug")
    queue = serializers.CharField(source="job.queue.name")
    state = serializers.CharField(source="job.state")


class NotebookOutput(WorkloadOutput):
    pending_reason = serializers.CharField(source="job.pending_reason")
    url = serializers.SerializerMethodField(help_text="Where it opens, through the portal (a member's session)")
    slice = serializers.CharField(help_text="What it holds while it runs, else what it asks for")
    node = serializers.CharField()
    idle_s = serializers.SerializerMethodField(
        help_text="Seconds without kernel activity (in the notebook's billed time); 0 while a kernel is busy; "
                  "null when not running or not known")
    cost_so_far = serializers.DecimalField(source="row.cost", max_digits=14, decimal_places=2, allow_null=True)
    currency = serializers.CharField(source="row.currency")
    idle_gpu_hours = serializers.DecimalField(max_digits=18, decimal_places=6, allow_null=True,
                                              help_text="Allocated GPU-hours the agents saw unused (the ledger)")
    idle_cost = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True,
                                         help_text="What those idle hours cost")
    created = serializers.DateTimeField(source="job.created")
    started = serializers.DateTimeField(source="job.started", allow_null=True)
    keep_alive_until = serializers.DateTimeField(source="kept_until", allow_null=True,
                                                 help_text="The idle rule skips it until then (null: it applies)")

    def get_url(self, row) -> str:
        return self.context["request"].build_absolute_uri(row.url)

    def get_idle_s(self, row) -> int | None:
        return None if row.idle_for is None else int(row.idle_for.total_seconds())


class WorkloadListApi(ListAPIView):
    """The caller's jobs of one kind that have not ended (in `workspace`, else in all the caller's
    workspaces); a subclass says which (`workloads`) and how a page of them reads (`rows`)."""

    filter_params = ("workspace",)

    @extend_schema(parameters=[OpenApiParameter("workspace", str, description="a workspace slug (default: all of mine)")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def workloads(self, user, workspace):
        raise NotImplementedError

    def rows(self, page) -> list:
        raise NotImplementedError

    def get_queryset(self):
        slug = self.request.query_params.get("workspace")
        workspace = portal_selectors.get_workspace_for_user(self.request.user, slug) if slug else None
        return self.workloads(self.request.user, workspace)

    def list(self, request, *args, **kwargs):
        rows = self.rows(self.paginate_queryset(self.get_queryset()))
        return self.get_paginated_response(self.serializer_class(rows, many=True, context={"request": request}).data)


class NotebookListApi(WorkloadListApi):
    """The caller's notebooks that have not ended (in `workspace`, else in all the caller's workspaces)."""

    serializer_class = NotebookOutput

    def workloads(self, user, workspace):
        return notebooks.notebooks_for(user, workspace, ended=False)

    def rows(self, page) -> list:
        return notebooks.notebook_rows(page, backend=get_backend(), now=clock.now())


class JobStopApi(APIView):
    """Stop a notebook (or service): its replicas end now, its GPU is free, nothing is billed until it starts."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=None, responses={200: JobOutput})
    def post(self, request, pk):
        job = services.stop_workload(request.user, portal_selectors.get_job_for_user(request.user, pk), "by the API")
        return Response(JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data)


class JobStartApi(APIView):
    """Start a stopped notebook (or service): Pending in its queue, placed like any job."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=None, responses={200: JobOutput})
    def post(self, request, pk):
        job = services.start_workload(request.user, portal_selectors.get_job_for_user(request.user, pk))
        return Response(JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data)


class NotebookDeleteInput(serializers.Serializer):
    delete_home = serializers.BooleanField(default=False, help_text="Also delete its home volume (default: kept)")


class NotebookDeleteApi(APIView):
    """Delete a notebook: cancelled (billed for what it held) unless it ended; its home volume is kept unless
    `delete_home` (then an ended notebook's home can be deleted too)."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=NotebookDeleteInput, responses={200: JobOutput})
    def post(self, request, pk):
        body = NotebookDeleteInput(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.delete_notebook(request.user, notebooks.get_notebook_for_user(request.user, pk),
                                       delete_home=body.validated_data["delete_home"])
        return Response(JobOutput(portal_selectors.get_job_for_user(request.user, job.pk)).data)


class KeepAliveInput(serializers.Serializer):
    keep_alive_until = serializers.CharField(
        allow_null=True, allow_blank=True, max_length=64,
        help_text="HH:MM (the next such time in your time zone) or an ISO date and time; null or empty: clear. "
                  "At most the queue's maximum runtime from now.")


class KeepAliveOutput(serializers.Serializer):
    id = serializers.IntegerField()
    keep_alive_until = serializers.DateTimeField(allow_null=True)


class NotebookKeepAliveApi(APIView):
    """Keep a notebook alive until a time (the idle rule skips it until then), or clear it; audited."""

    token_scopes = {"POST": "submit"}

    @extend_schema(request=KeepAliveInput, responses={200: KeepAliveOutput})
    def post(self, request, pk):
        body = KeepAliveInput(data=request.data)
        body.is_valid(raise_exception=True)
        job = notebooks.get_notebook_for_user(request.user, pk)
        kept = notebooks.keep_alive(request.user, job, body.validated_data["keep_alive_until"])
        return Response(KeepAliveOutput({"id": job.pk, "keep_alive_until": kept.until if kept else None}).data)
