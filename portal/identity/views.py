"""The sign-in and sign-out pages: local accounts as ever, plus a button per OIDC provider."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import urlencode

from portal import invitations
from portal.identity import mfa, oidc


def local_login_refused(request):
    return render(request, "identity/local_login_off.html", status=403)


LDAP_BACKEND = "portal.identity.ldap.LDAPBackend"


def password_form_shown() -> bool:
    """The username and password form: for local accounts, or for a directory's (LDAP) when one is set."""
    return settings.LOCAL_LOGIN or getattr(settings, "LDAP_ENABLED", False)


class LoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        if not password_form_shown():
            return local_login_refused(request)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        # LOCAL_LOGIN off with LDAP on: the form signs in directory accounts only
        user = form.get_user()
        if not settings.LOCAL_LOGIN and getattr(user, "backend", "") != LDAP_BACKEND:
            return local_login_refused(self.request)
        if mfa.has_totp(user) and mfa.is_local(user):  # the code next, then the session
            return mfa.second_step(self.request, user, self.get_success_url())
        if unconfirmed := unconfirmed_email(user):
            return email_confirmation_needed(self.request, user, unconfirmed)
        response = super().form_valid(form)
        if mfa.must_enrol(user):
            return mfa.enrol_redirect(self.request)
        return response

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "local_login": settings.LOCAL_LOGIN,
                "password_form": password_form_shown(), "oidc_providers": oidc.configured_providers()}


def unconfirmed_email(user) -> str:
    """With ACCOUNT_EMAIL_VERIFICATION mandatory: the local account's address when allauth records it as not
    yet confirmed (an address set by the operators or proven by an invitation has no such record)."""
    if settings.ACCOUNT_EMAIL_VERIFICATION != "mandatory" or not user.email or not user.has_usable_password():
        return ""
    return "" if invitations.verified_email(user) else user.email


def email_confirmation_needed(request, user, email: str):
    """Sign-in held until the address is confirmed: its link is mailed (again), and the page says so."""
    from allauth.account.internal.flows.email_verification import send_verification_email_to_address
    from allauth.account.models import EmailAddress

    address = EmailAddress.objects.filter(user=user, email__iexact=email).first()
    if address is not None:
        send_verification_email_to_address(request, address)
    return render(request, "account/verification_sent.html", {"held": True}, status=403)


def admin_login(admin_view):
    """The admin's password form, refused when local sign-in is off. An account with two-factor
    authentication signs in on the portal's form, which asks for the code: the admin's has no second step."""
    def view(request, *args, **kwargs):
        if request.method == "POST" and not settings.LOCAL_LOGIN:
            return local_login_refused(request)
        signed_in_before = request.user.is_authenticated
        response = admin_view(request, *args, **kwargs)
        if (request.method == "POST" and not signed_in_before and request.user.is_authenticated
                and mfa.has_totp(request.user)):
            logout(request)
            next_url = request.POST.get("next") or request.GET.get("next") or "/admin/"
            return redirect(resolve_url("login") + "?" + urlencode({"next": next_url}))
        return response
    return view


class LogoutView(auth_views.LogoutView):
    """Ends the portal's session; signed in through a provider that offers it, goes on to end that one too."""

    def post(self, request, *args, **kwargs):
        provider_id, id_token = request.session.get(oidc.PROVIDER), request.session.get(oidc.ID_TOKEN, "")
        response = super().post(request, *args, **kwargs)
        if provider_id:
            after = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
            if url := oidc.end_session_url(request, provider_id, id_token, after):
                return redirect(url)
        return response


def login_cancelled(request):
    return render(request, "socialaccount/login_cancelled.html")


def login_error(request):
    return render(request, "socialaccount/authentication_error.html", status=401)


def local_accounts_only(view):
    """allauth's password pages, for local accounts: refused when LOCAL_LOGIN is off, and for an account that
    has no password here (made by an OIDC provider: its password is the provider's)."""
    def wrapped(request, *args, **kwargs):
        if not settings.LOCAL_LOGIN:
            return local_login_refused(request)
        if request.user.is_authenticated and not request.user.has_usable_password():
            return render(request, "identity/no_local_password.html", status=403)
        return view(request, *args, **kwargs)
    return wrapped
