"""Money reads one way on every page, the money formatter's (scheduling/formats.py): the currency's symbol,
grouping and two places, never "4349.55 CNY" beside "¥19,705.15"."""

from __future__ import annotations

import re
from pathlib import Path

from tests.i18n.test_i18n_pages import _busy

TEMPLATES = Path(__file__).resolve().parents[3] / "templates"
# an amount written bare, then its currency's code: "{{ x.cost }} {{ x.currency }}" or "{{ x.cost }}</td><td>{{ ... }}"
BARE_AMOUNT = re.compile(r"\{\{ [\w.]*(cost|total|amount|opening|closing|saving)\b[\w.]*(\|floatformat:\d)?"
                         r"(\|default:\"[^\"]*\")? \}\}(</td><td>| )\{\{ [\w.]*currency \}\}")


def test_no_template_writes_an_amount_then_its_currency_code():
    offenders = [f"{path.relative_to(TEMPLATES)}: {m.group(0)}" for path in TEMPLATES.rglob("*.html")
                 for m in BARE_AMOUNT.finditer(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_statement_writes_its_amounts_with_the_currency_symbol(client, cluster, clock):
    _busy(cluster)
    client.force_login(cluster.finance)
    html = client.get(f"/reports/statements/vision-lab/{clock.now:%Y-%m}/").content.decode()
    for field in ("opening", "total", "closing", "exclusive"):
        assert re.search(rf'id="statement-{field}">\$[\d,]+\.\d\d<', html), field
    assert "$" in re.search(r'id="statement-lines".*?</table>', html, re.S).group(0)


def test_a_service_page_writes_its_cost_per_1000_requests_as_money(client, cluster, clock):
    from tests.i18n.test_i18n_pages import _a_service

    service = _a_service(cluster)
    client.force_login(cluster.alice)
    html = client.get(f"/services/{service.pk}/").content.decode()
    assert "USD</div>" not in html and not re.search(r"\d\.\d{4} USD", html)
