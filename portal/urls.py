from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.identity import oidc
from portal.identity import views as identity
from portal.members import views as members
from portal.notebook_proxy import notebook_redirect
from portal.notifications import views as notifications
from portal.pages import account, device, invitation, language, ssh_keys, tokens, user_reports, volumes
from portal.pages import workspaces as views
from portal.secrets import views as workspace_secrets
from portal.serve_proxy import serve_not_found, serve_proxy

admin.site.site_header = "GPU Platform console"
admin.site.site_title = "GPU Platform console"
admin.site.index_title = "Operate the platform"
admin.site.login = identity.admin_login(admin.site.login)  # refused, as /login/'s, when LOCAL_LOGIN is off

handler500 = "portal.server_error.server_error"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
    path("login/", identity.LoginView.as_view(), name="login"),
    path("logout/", identity.LogoutView.as_view(), name="logout"),
    # OIDC sign-in (allauth): /accounts/oidc/<provider>/login/ and its callback, kept here to see the ID token
    path("accounts/oidc/<str:provider_id>/login/callback/", oidc.callback, name="openid_connect_callback"),
    path("accounts/3rdparty/login/cancelled/", identity.login_cancelled, name="socialaccount_login_cancelled"),
    path("accounts/3rdparty/login/error/", identity.login_error, name="socialaccount_login_error"),
    path("accounts/", include("allauth.socialaccount.providers.openid_connect.urls")),
    path("accounts/", include("portal.identity.password_urls")),
    path("login/", identity.LoginView.as_view(), name="account_login"),  # the name allauth's pages link to
    path("workspaces/switch/", views.switch_workspace, name="switch-workspace"),
    path("w/<slug:slug>/", views.workspace_detail, name="workspace"),
    path("w/<slug:slug>/service-accounts/", views.workspace_service_accounts, name="workspace-service-accounts"),
    path("w/<slug:slug>/ssh/", views.workspace_ssh, name="workspace-ssh"),
    path("account/tokens/", tokens.api_tokens, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens.api_token_revoke, name="api-token-revoke"),
    path("account/ssh-keys/", ssh_keys.ssh_keys_page, name="ssh-keys"),
    path("device/", device.device, name="device"),
    path("account/preferences/", account.preferences, name="preferences"),
    path("account/usage/", user_reports.my_usage, name="account-usage"),
    path("account/sessions/", account.sessions, name="account-sessions"),
    path("account/sessions/<int:session_id>/end/", account.session_end, name="account-session-end"),
    path("language/", language.switch_language, name="switch-language"),
    path("w/<slug:slug>/members/", members.members, name="workspace-members"),
    path("w/<slug:slug>/members/<int:member_id>/remove/", members.member_remove, name="workspace-member-remove"),
    re_path(r"^w/(?P<slug>[-a-zA-Z0-9_]+)/invitations/(?P<invitation_id>[0-9]+)/(?P<action>resend|revoke)/$",
            members.invitation_action, name="workspace-invitation-action"),
    path("invitations/<str:token>/", invitation.accept, name="invitation-accept"),
    path("w/<slug:slug>/webhook/", notifications.webhook, name="workspace-webhook"),
    path("w/<slug:slug>/secrets/", workspace_secrets.secrets_page, name="workspace-secrets"),
    path("w/<slug:slug>/volumes/", volumes.volumes, name="workspace-volumes"),
    path("w/<slug:slug>/volumes/<slug:name>/upload/", volumes.volume_upload, name="workspace-volume-upload"),
    path("w/<slug:slug>/volumes/<slug:name>/delete/", volumes.volume_delete, name="workspace-volume-delete"),
    path("w/<slug:slug>/datasets/<slug:name>/v<int:number>/delete/", volumes.dataset_version_delete,
         name="workspace-dataset-version-delete"),
    path("notifications/", notifications.notification_list, name="notifications"),
    path("notifications/settings/", notifications.notification_settings, name="notification-settings"),
    # a notebook, from the portal: a member goes on to its own host (portal/notebook_origin.py)
    re_path(r"^nb/(?P<workspace>[-a-zA-Z0-9_]+)/(?P<name>[a-z0-9-]+)/(?P<path>.*)$", notebook_redirect,
            name="notebook-proxy"),
    # an inference service's endpoint: /serve/<workspace>/<name>/<the server's own path>
    re_path(r"^serve/(?P<workspace>[-a-zA-Z0-9_]+)/(?P<name>[a-z0-9-]+)/(?P<path>.*)$", serve_proxy,
            name="serve-proxy"),
    # any other /serve/ path: a 404 its OpenAI clients can read (/serve/<ws>/<name> still gets its slash)
    re_path(r"^serve/(?![-a-zA-Z0-9_]+/[a-z0-9-]+$)", serve_not_found),
    path("", include("portal.pages.urls")),
    path("console/", include("portal.console.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api.urls")),
    path("scim/v2/", include("portal.scim.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Its script is a file of its own (?script), so the page needs no inline script under the CSP
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
