from django.urls import path

from portal.api import jobs as api

urlpatterns = [
    path("jobs/", api.JobListCreateApi.as_view(), name="api-jobs"),
    path("jobs/<int:pk>/", api.JobDetailApi.as_view(), name="api-job"),
    path("jobs/<int:pk>/events/", api.JobEventsApi.as_view(), name="api-job-events"),
    path("jobs/<int:pk>/cancel/", api.JobCancelApi.as_view(), name="api-job-cancel"),
    path("specs/image-form/", api.ImageFormApi.as_view(), name="api-image-form"),
]
