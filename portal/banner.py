"""`python -m portal.banner --url URL`: the one banner `make run` prints once the portal answers: where it
is, and the demo logins that exist in the database."""

from __future__ import annotations

import argparse
import os
import sys

RULE = "=" * 72


def demo_logins() -> list[tuple[str, str, str]]:
    """(user, password, what they are) for each demo user present in the database."""
    from django.contrib.auth import get_user_model

    from portal.demo.chinese import OWNER
    from portal.demo.tenants import DEMO_PASSWORDS
    from portal.models import Membership

    logins = {**DEMO_PASSWORDS, OWNER[0]: OWNER[1]}  # chen reads the portal in Chinese
    users = {u.username: u for u in get_user_model().objects.filter(username__in=logins)}
    roles: dict[str, list[str]] = {}
    for m in Membership.objects.filter(user__in=users.values()).select_related("user", "workspace").order_by(
            "workspace__slug"):
        roles.setdefault(m.user.username, []).append(f"{m.role} of {m.workspace.slug}")
    rows = []
    for name, password in logins.items():
        if name not in users:
            continue
        what = ["operator (staff): /console/ and /admin/"] if users[name].is_staff else []
        rows.append((name, password, ", ".join(what + roles.get(name, [])) or "no workspace yet"))
    return rows


def banner_text(url: str, logins: list[tuple[str, str, str]]) -> str:
    url = url.rstrip("/") + "/"
    lines = [RULE, f"  GPU Platform is up: {url}", ""]
    if logins:
        width = max(len(name) for name, _, _ in logins)
        pwidth = max(len(password) for _, password, _ in logins)
        lines.append("  Demo logins (user / password):")
        lines += [f"    {name:<{width}}  {password:<{pwidth}}  {what}" for name, password, what in logins]
    else:
        lines.append("  No demo users: `make demo` loads them, `manage.py createsuperuser` makes an operator.")
    lines += ["", f"  API docs {url}api/docs/ · logs below: one line per request (LOG_LEVEL=DEBUG for more)",
              "  Ctrl-C stops everything.", RULE]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    print(banner_text(args.url, demo_logins()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
