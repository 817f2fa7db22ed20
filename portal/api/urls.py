from django.urls import path, re_path

from portal.api import advice, agent, costs, errors, jobs, notebooks, quotes, services, specs, workspaces

urlpatterns = [
    path("workspaces/", workspaces.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/", workspaces.WorkspaceDetailApi.as_view(), name="api-workspace"),
    path("workspaces/<slug:slug>/queues/", workspaces.WorkspaceQueuesApi.as_view(), name="api-workspace-queues"),
    path("jobs/", jobs.JobListCreateApi.as_view(), name="api-jobs"),
    path("jobs/<int:pk>/", jobs.JobDetailApi.as_view(), name="api-job"),
    path("jobs/<int:pk>/events/", jobs.JobEventsApi.as_view(), name="api-job-events"),
    path("jobs/<int:pk>/cancel/", jobs.JobCancelApi.as_view(), name="api-job-cancel"),
    path("jobs/<int:pk>/logs/", jobs.JobLogsApi.as_view(), name="api-job-logs"),
    path("specs/image-form/", jobs.ImageFormApi.as_view(), name="api-image-form"),
    path("specs/image-form/values/", specs.ImageFormValuesApi.as_view(), name="api-image-form-values"),
    path("quotes/", quotes.QuoteApi.as_view(), name="api-quotes"),
    path("costs/", costs.CostsApi.as_view(), name="api-costs"),
    path("agent/usage", agent.UsageApi.as_view(), name="api-agent-usage"),
    path("agent/join", agent.JoinApi.as_view(), name="api-agent-join"),
    path("agent/heartbeat", agent.HeartbeatApi.as_view(), name="api-agent-heartbeat"),
    path("agent/assignments", agent.AssignmentsApi.as_view(), name="api-agent-assignments"),
    path("jobs/<int:pk>/stop/", notebooks.JobStopApi.as_view(), name="api-job-stop"),
    path("jobs/<int:pk>/start/", notebooks.JobStartApi.as_view(), name="api-job-start"),
    path("notebooks/", notebooks.NotebookListApi.as_view(), name="api-notebooks"),
    path("notebooks/<int:pk>/delete/", notebooks.NotebookDeleteApi.as_view(), name="api-notebook-delete"),
    path("services/", services.ServiceListApi.as_view(), name="api-services"),
    path("services/<int:pk>/", services.ServiceDetailApi.as_view(), name="api-service"),
    path("services/<int:pk>/scale/", services.ServiceScaleApi.as_view(), name="api-service-scale"),
    path("services/<int:pk>/delete/", services.ServiceDeleteApi.as_view(), name="api-service-delete"),
    path("advice/inference/", advice.InferenceAdviceApi.as_view(), name="api-advice-inference"),
    # Last: any other /api/v1/ path (e.g. /jobs/abc/) is a problem-details 404, not Django's HTML page.
    re_path(r"^", errors.not_found, name="api-not-found"),
]
