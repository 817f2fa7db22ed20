from django.urls import include, path

from portal.api import views

urlpatterns = [
    path("workspaces/", views.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/", views.WorkspaceDetailApi.as_view(), name="api-workspace"),
    path("", include("scheduling.api_urls")),
    path("", include("billing.api_urls")),
]
