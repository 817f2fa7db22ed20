from django.urls import path

from portal.pages import jobs as views

urlpatterns = [
    path("submit/", views.submit, name="submit"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/log/", views.job_log, name="job-log"),
    path("cluster/", views.cluster, name="cluster"),
]
