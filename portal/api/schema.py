"""OpenAPI description of the token authentication (imported by the app config)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.authentication.ApiTokenAuthentication"
    name = "ApiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal API token (gpt_...)."}


class NodeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.api.agent.NodeTokenAuthentication"
    name = "NodeToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A node agent's token (gpn_...)."}
