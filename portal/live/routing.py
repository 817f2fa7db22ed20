from django.urls import path, re_path

from portal.live.consumers import JobConsumer, OperatorsConsumer, WorkspaceConsumer
from portal.notebook_socket import NotebookSocket

websocket_urlpatterns = [
    path("ws/workspaces/<slug:slug>/", WorkspaceConsumer.as_asgi()),
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
    path("ws/cluster/", OperatorsConsumer.as_asgi()),
    # a notebook's websockets (its kernel channels), the same path as the HTTP proxy's in portal/urls.py
    re_path(r"^nb/(?P<workspace>[-a-zA-Z0-9_]+)/(?P<name>[a-z0-9-]+)/(?P<path>.*)$", NotebookSocket()),
]
