from django.urls import path

from portal.pages import job_list, job_page, jobs, notebooks, reports, submit

urlpatterns = [
    path("submit/", submit.submit, name="submit"),
    path("jobs/", job_list.job_list, name="jobs"),
    path("jobs/cancel/", job_list.job_bulk_cancel, name="jobs-cancel"),
    path("jobs/<int:pk>/", job_page.job_detail, name="job"),
    path("jobs/<int:pk>/usage/", job_page.job_usage, name="job-usage"),
    path("jobs/<int:pk>/cancel/", jobs.job_cancel, name="job-cancel"),
    path("jobs/<int:pk>/log/", jobs.job_log, name="job-log"),
    path("cluster/", jobs.cluster, name="cluster"),
    path("reports/", reports.report_page, name="reports"),
    path("reports/export.csv", reports.report_csv, name="reports-csv"),
    path("reports/exports/", reports.excel_start, name="reports-excel"),
    path("reports/exports/<uuid:pk>/", reports.excel_status, name="reports-export"),
    path("reports/exports/<uuid:pk>/download/", reports.excel_download, name="reports-export-download"),
    path("reports/statements/<slug:slug>/<str:month>/", reports.statement, name="reports-statement"),
    path("reports/statements/<slug:slug>/<str:month>/statement.csv", reports.statement_csv,
         name="reports-statement-csv"),
    path("reports/statements/<slug:slug>/<str:month>/statement.xlsx", reports.statement_xlsx,
         name="reports-statement-xlsx"),
    path("reports/statements/<slug:slug>/<str:month>/close/", reports.statement_close, name="reports-statement-close"),
    path("reports/adjustments/<slug:slug>/", reports.adjustment_add, name="reports-adjustment"),
    path("reports/budgets/<slug:slug>/", reports.budget_save, name="reports-budget"),
    path("notebooks/", notebooks.notebook_list, name="notebooks"),
    path("notebooks/<int:pk>/stop/", notebooks.notebook_stop, name="notebook-stop"),
    path("notebooks/<int:pk>/start/", notebooks.notebook_start, name="notebook-start"),
    path("notebooks/<int:pk>/delete/", notebooks.notebook_delete, name="notebook-delete"),
]
