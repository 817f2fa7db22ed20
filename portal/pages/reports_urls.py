from django.urls import path

from portal.pages import reports as report_views

urlpatterns = [
    path("reports/", report_views.report_page, name="reports"),
    path("reports/export.csv", report_views.report_csv, name="reports-csv"),
    path("reports/exports/", report_views.excel_start, name="reports-excel"),
    path("reports/exports/<uuid:pk>/", report_views.excel_status, name="reports-export"),
    path("reports/exports/<uuid:pk>/download/", report_views.excel_download, name="reports-export-download"),
    path("reports/statements/<slug:slug>/<str:month>/", report_views.statement, name="reports-statement"),
    path("reports/budgets/<slug:slug>/", report_views.budget_save, name="reports-budget"),
]
