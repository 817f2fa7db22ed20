from django.contrib import admin

from portal.models import ApiToken, Membership, UserPreference, Workspace


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
    list_display = ["name", "user", "hint", "created", "last_used", "revoked"]
    readonly_fields = ["digest", "hint", "created", "last_used"]
    list_filter = ["revoked"]


@admin.register(UserPreference)
class UserPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "time_zone"]
    search_fields = ["user__username", "time_zone"]
    autocomplete_fields = ["user"]
