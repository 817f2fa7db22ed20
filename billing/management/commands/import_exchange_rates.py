"""Import the ECB's reference rates (the eurofxref CSV, daily or history) into the exchange-rate table.

All or nothing: a zero, negative or future rate, a bad day, or a stored day given another rate refuses the
whole file, each cell named. Rates already stored with the same value are left as they are, so the daily
file can be imported every day. Exit status: 0 imported, 1 refused.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from billing.exchange_rates import RateError, import_ecb_csv


class Command(BaseCommand):
    help = "Import ECB reference exchange rates (eurofxref CSV: Date, USD, JPY, ... per 1 EUR)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the CSV file, or - for standard input")
        parser.add_argument("--by", default="", help="the operator recorded as having stored the rates")

    def handle(self, *args, file: str, by: str, **options):
        if file == "-":
            import sys

            text = sys.stdin.read()
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"{file}: no such file")
            text = path.read_text(encoding="utf-8-sig")
        user = None
        if by:
            user = get_user_model().objects.filter(username=by, is_staff=True, is_active=True).first()
            if user is None:
                raise CommandError(f"--by {by!r} is not an active operator")
        try:
            result = import_ecb_csv(text, user=user, source="command")
        except RateError as error:
            raise CommandError("nothing imported:\n" + "\n".join(
                f"  {where}: {message}" for where, messages in error.errors.items() for message in messages)) from None
        span = f"{result.days[0]} to {result.days[-1]}" if result.days else "no day"
        self.stdout.write(f"{result.stored} rates stored, {result.unchanged} already stored ({span})")
        if result.skipped_currencies:
            self.stdout.write(f"not billed in, skipped: {', '.join(result.skipped_currencies)}")
