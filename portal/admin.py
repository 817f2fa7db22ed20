from django.contrib import admin, messages
from django.utils.translation import gettext

from portal import ssh_keys
from portal.models import (
    ApiToken,
    Membership,
    ServiceAccount,
    SshAuthFailure,
    SshKey,
    SshSession,
    UserPreference,
    Webhook,
    WebhookDelivery,
    Workspace,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["workspace", "user", "role", "created"]
    list_filter = ["role", "workspace"]
    search_fields = ["user__username", "workspace__slug"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "hint", "scope", "created", "expires", "last_used", "revoked"]
    # A token is made by its own user (/account/tokens/) or by a workspace owner for a service account, so
    # the value is shown once to whoever will use it: the admin neither mints one nor hands one to another user.
    readonly_fields = ["user", "name", "digest", "hint", "scope", "created", "expires", "last_used"]
    list_filter = ["scope", "revoked"]

    def has_add_permission(self, request):
        return False


@admin.register(ServiceAccount)
class ServiceAccountAdmin(admin.ModelAdmin):
    list_display = ["workspace", "name", "user", "created_by", "created", "deleted"]
    readonly_fields = ["workspace", "name", "user", "created_by", "created", "deleted"]
    list_filter = ["workspace"]

    def has_add_permission(self, request):  # made by a workspace's owner, with its membership
        return False


@admin.register(UserPreference)
class UserPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "time_zone"]
    search_fields = ["user__username", "time_zone"]
    autocomplete_fields = ["user"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["workspace", "url", "active", "created"]
    exclude = ["secret"]  # the owner's to keep; a new one is made on the workspace's Webhook page


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["created", "webhook", "event", "state", "attempts", "last_status"]
    list_filter = ["state", "event"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SshKey)
class SshKeyAdmin(admin.ModelAdmin):
    """Staff revoke any user's key here (the action); a key is added by its own user only."""

    list_display = ["name", "user", "fingerprint", "created", "last_used", "revoked", "revoked_by"]
    readonly_fields = ["user", "name", "public_key", "fingerprint", "created", "last_used", "revoked", "revoked_by"]
    list_filter = ["revoked"]
    search_fields = ["user__username", "fingerprint", "name"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected SSH keys")
    def revoke(self, request, queryset):
        for key in queryset:
            ssh_keys.revoke_key(request.user, key.pk)
        self.message_user(request, gettext("%(count)s SSH keys revoked.") % {"count": queryset.count()},
                          messages.SUCCESS)


@admin.register(SshSession)
class SshSessionAdmin(admin.ModelAdmin):
    list_display = ["user", "job", "replica", "source", "started", "ended", "bytes_in", "bytes_out"]
    readonly_fields = [f.name for f in SshSession._meta.fields]
    list_filter = ["ended"]

    def has_add_permission(self, request):
        return False


@admin.register(SshAuthFailure)
class SshAuthFailureAdmin(admin.ModelAdmin):
    list_display = ["when", "source", "fingerprint", "username", "reason"]
    readonly_fields = [f.name for f in SshAuthFailure._meta.fields]
    list_filter = ["reason"]

    def has_add_permission(self, request):
        return False
