from django.urls import path

from billing import api

urlpatterns = [
    path("quotes/", api.QuoteApi.as_view(), name="api-quotes"),
]
