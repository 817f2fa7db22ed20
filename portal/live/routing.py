from django.urls import path

from portal.live.consumers import JobConsumer, OperatorsConsumer, WorkspaceConsumer

websocket_urlpatterns = [
    path("ws/workspaces/<slug:slug>/", WorkspaceConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/cluster/", OperatorsConsumer.as_asgi()),
]
