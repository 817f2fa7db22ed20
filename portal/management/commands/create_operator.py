"""The first operator (staff and superuser: /console/ and /admin/) of a fresh install, or a reset of one.

The password comes from a file (--password-file, e.g. a mounted Secret) or OPERATOR_PASSWORD, never from
argv (visible in `ps` and shell history), and is never printed. Running it again with the same account
changes nothing; --update resets the password and email and makes the account an active operator.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email
from django.db import transaction

from portal.console import audit

PASSWORD_ENV = "OPERATOR_PASSWORD"
OPERATOR_FIELDS = ("username", "email", "is_staff", "is_superuser", "is_active")


class Command(BaseCommand):
    help = "Create the first operator account (or reset it with --update). Password from a file or OPERATOR_PASSWORD."

    def add_arguments(self, parser):
        parser.add_argument("--username", required=True, help="the operator's login name")
        parser.add_argument("--email", required=True, help="the operator's email address")
        parser.add_argument("--password-file", type=Path,
                            help=f"file holding the password (first line); default: the {PASSWORD_ENV} variable")
        parser.add_argument("--update", action="store_true",
                            help="if the account exists: set its password and email and make it an active operator")

    def handle(self, *args, username: str, email: str, password_file: Path | None, update: bool, **options):
        username, email = username.strip(), email.strip()
        if not username:
            raise CommandError("--username must not be empty")
        try:
            validate_email(email)
        except ValidationError:
            raise CommandError(f"--email {email!r} is not an email address") from None
        password = self._password(password_file)
        User = get_user_model()
        with transaction.atomic():
            user = User.objects.select_for_update().filter(username__iexact=username).first()
            if user is not None and not update:
                if user.is_staff and user.is_superuser and user.is_active:
                    if not user.check_password(password):
                        raise CommandError(f"operator {user.username!r} exists with another password; "
                                           "--update resets it")
                    self.stdout.write(f"operator {user.username!r} exists; nothing changed")
                    return
                raise CommandError(f"a user named {user.username!r} exists and is not an active operator; "
                                   "--update makes it one")
            before = audit.snapshot(user, OPERATOR_FIELDS) if user is not None else {}
            user = user or User(username=username)
            self._check_password(password, user, email)
            user.email = email
            user.is_staff = user.is_superuser = user.is_active = True
            user.set_password(password)
            user.save()
            after = audit.snapshot(user, OPERATOR_FIELDS)
            changes = audit.diff(before, after)
            audit.record(None, "update" if before else "create", user, changes=changes,
                         message="operator set by manage.py create_operator")
        self.stdout.write(f"operator {user.username!r} {'updated' if before else 'created'}")

    def _password(self, password_file: Path | None) -> str:
        if password_file is not None:
            try:
                lines = password_file.read_text().splitlines()
            except OSError as exc:
                raise CommandError(f"cannot read --password-file {password_file}: {exc.strerror}") from None
            password = lines[0] if lines else ""
            where = f"--password-file {password_file}"
        else:
            password = os.environ.get(PASSWORD_ENV, "")
            where = PASSWORD_ENV
        if not password:
            raise CommandError(f"no password: {where} is empty (give --password-file or set {PASSWORD_ENV})")
        return password

    @staticmethod
    def _check_password(password: str, user, email: str) -> None:
        user.email = email
        try:
            validate_password(password, user)
        except ValidationError as error:
            raise CommandError("the password is refused: " + " ".join(error.messages)) from None
