from django.urls import path

from portal.api import views

urlpatterns = [
    path("workspaces/", views.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/", views.WorkspaceDetailApi.as_view(), name="api-workspace"),
]
