from django.urls import path

from scheduling import views

urlpatterns = [
    path("submit/", views.submit, name="submit"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/<int:pk>/", views.job_detail, name="job"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job-cancel"),
]
