import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()  # before importing consumers: it sets up Django

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from portal.door import Door  # noqa: E402
from portal.live.routing import websocket_urlpatterns  # noqa: E402
from portal.notebook_origin import on_notebook_host  # noqa: E402
from portal.notebook_socket import NotebookSocket  # noqa: E402


class NotebookHostRouter:
    """Websockets to a notebook's host (NOTEBOOK_ORIGIN) go to the notebook's socket alone, the others to
    the portal's; HTTP is split the same way by portal.middleware.NotebookHostMiddleware. The portal's
    sockets check their Origin against ALLOWED_HOSTS, which has no notebook host: a notebook's page
    cannot open them."""

    def __init__(self, portal, notebooks):
        self.portal, self.notebooks = portal, notebooks

    async def __call__(self, scope, receive, send):
        if on_notebook_host(scope):
            return await self.notebooks(scope, receive, send)
        return await self.portal(scope, receive, send)


# The door first: body limits and the database breaker, before Django reads a body
application = Door(ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": NotebookHostRouter(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))), NotebookSocket()),
    }
))
