from django.urls import include, path

from portal.api import workspaces as views

urlpatterns = [
    path("workspaces/", views.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/", views.WorkspaceDetailApi.as_view(), name="api-workspace"),
    path("", include("portal.api.jobs_urls")),
    path("", include("portal.api.quotes_urls")),
]
