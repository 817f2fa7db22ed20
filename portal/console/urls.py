from django.urls import path

from portal.console import views

urlpatterns = [
    path("", views.dashboard, name="console"),
    path("advice/", views.advice, name="console-advice"),
    path("pools/", views.pools, name="console-pools"),
    path("pools/<slug:name>/", views.pool_edit, name="console-pool"),
    path("nodes/", views.nodes, name="console-nodes"),
    path("nodes/<str:name>/cordon/", views.node_cordon, name="console-node-cordon"),
    path("nodes/<str:name>/drain/", views.node_drain, name="console-node-drain"),
    path("queues/", views.queues, name="console-queues"),
    path("queues/new/", views.queue_edit, name="console-queue-new"),
    path("queues/<slug:name>/", views.queue_edit, name="console-queue"),
    path("workspaces/", views.workspaces, name="console-workspaces"),
    path("workspaces/<slug:slug>/", views.workspace_detail, name="console-workspace"),
    path("prices/", views.prices, name="console-prices"),
    path("tokens/", views.tokens, name="console-tokens"),
    path("audit/", views.audit_log, name="console-audit"),
]
