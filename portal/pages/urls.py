from django.urls import path

from portal.pages import jobs, reports

urlpatterns = [
    path("submit/", jobs.submit, name="submit"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job"),
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
]
