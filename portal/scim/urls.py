"""/scim/v2/: the names of django-scim2's own URL conf (its adapters reverse them), on the portal's views."""

from django.urls import path, re_path

from portal.scim import views

app_name = "scim"

not_implemented = views.NotImplementedView.as_view()

urlpatterns = [
    path("", not_implemented, name="root"),
    path(".search", not_implemented, name="search"),
    path("Users/.search", not_implemented, name="users-search"),
    path("Groups/.search", not_implemented, name="groups-search"),
    path("Me", not_implemented, name="me"),
    path("Bulk", not_implemented, name="bulk"),
    path("Users", views.UsersView.as_view(), name="users"),
    path("Users/<str:uuid>", views.UsersView.as_view(), name="users"),
    path("Groups", views.GroupsView.as_view(), name="groups"),
    path("Groups/<str:uuid>", views.GroupsView.as_view(), name="groups"),
    path("ServiceProviderConfig", views.ServiceProviderConfigView.as_view(), name="service-provider-config"),
    path("ResourceTypes", views.ResourceTypesView.as_view(), name="resource-types"),
    path("ResourceTypes/<str:uuid>", views.ResourceTypesView.as_view(), name="resource-types"),
    path("Schemas", views.SchemasView.as_view(), name="schemas"),
    path("Schemas/<str:uuid>", views.SchemasView.as_view(), name="schemas"),
    re_path(r"^", views.NotFoundView.as_view()),  # any other path: SCIM's 404, after the token
]
