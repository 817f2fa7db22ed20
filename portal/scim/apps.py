from django.apps import AppConfig


class ScimConfig(AppConfig):
    name = "portal.scim"
    label = "scim"
    verbose_name = "SCIM provisioning"
