from django.urls import path

from portal.consumers import WorkspaceConsumer

websocket_urlpatterns = [
    path("ws/workspaces/<slug:slug>/", WorkspaceConsumer.as_asgi()),
]
