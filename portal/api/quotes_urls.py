from django.urls import path

from portal.api import agent as agent_api
from portal.api import quotes as api

urlpatterns = [
    path("quotes/", api.QuoteApi.as_view(), name="api-quotes"),
    path("agent/usage", agent_api.UsageApi.as_view(), name="api-agent-usage"),
    path("agent/heartbeat", agent_api.HeartbeatApi.as_view(), name="api-agent-heartbeat"),
    path("agent/assignments", agent_api.AssignmentsApi.as_view(), name="api-agent-assignments"),
]
