"""Choosing the language: the header switcher (cookie, and the preference of a signed-in user),
the per-user preference winning over Accept-Language, and the API answering by Accept-Language."""

from datetime import date
from decimal import Decimal

import pytest
from django.utils import translation
from rest_framework.test import APIClient

from portal.models import UserPreference
from portal.templatetags.money import long_date, money


def test_an_anonymous_page_follows_accept_language(client, tenants):
    assert "登录" in client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert "Log in" in client.get("/login/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()


def test_the_switcher_sets_the_cookie_for_anonymous_readers(client, tenants):
    response = client.post("/language/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert response.cookies["django_language"].value == "zh-hans"
    assert "用户名" in client.get("/login/", HTTP_ACCEPT_LANGUAGE="en").content.decode()


def test_the_switcher_saves_a_signed_in_users_preference(client, tenants):
    client.force_login(tenants.alice)
    page = client.get("/").content.decode()
    assert 'id="language-switcher"' in page and 'action="/language/"' in page
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    assert UserPreference.objects.get(user=tenants.alice).language == "zh-hans"
    client.cookies.clear()  # another browser: the preference still holds
    client.force_login(tenants.alice)
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<html lang="zh-hans">' in page and "仪表盘" in page


def test_the_preference_is_per_user(client, tenants):
    UserPreference.objects.create(user=tenants.alice, language="zh-hans")
    client.force_login(tenants.bob)
    assert '<html lang="en">' in client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    client.force_login(tenants.alice)
    assert '<html lang="zh-hans">' in client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()


def test_the_switcher_refuses_an_unknown_language_and_an_outside_next(client, tenants):
    client.force_login(tenants.alice)
    refused = client.post("/language/", {"language": "klingon", "next": "/"})
    assert refused.status_code == 400
    assert not UserPreference.objects.filter(user=tenants.alice).exists()
    outside = client.post("/language/", {"language": "en", "next": "https://evil.example/"})
    assert outside["Location"] == "/"
    assert client.get("/language/").status_code == 405


def test_the_preferences_page_saves_the_language(client, tenants):
    client.force_login(tenants.alice)
    response = client.post("/account/preferences/", {"language": "zh-hans", "time_zone": ""})
    assert response.status_code == 302
    assert UserPreference.objects.get(user=tenants.alice).language == "zh-hans"
    assert "偏好设置已保存" in client.get("/account/preferences/").content.decode()
    bad = client.post("/account/preferences/", {"language": "xx", "time_zone": "Asia/Shanghai"})
    assert bad.status_code == 400
    assert UserPreference.objects.get(user=tenants.alice).time_zone == ""  # nothing changed


def test_api_errors_read_in_chinese_by_accept_language(tenants):
    api = APIClient()
    api.force_authenticate(tenants.alice)
    missing = api.get("/api/v1/no-such-operation/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert missing.status_code == 404
    assert missing.json()["title"] == "未找到"
    assert "上没有 API 操作" in missing.json()["detail"]
    assert missing.json()["type"] == "urn:gpu-platform:problem:not-found"  # identifiers stay
    invalid = api.post("/api/v1/jobs/", {"spec": "name: [unclosed"}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert invalid.status_code == 400 and invalid.json()["title"] in ("作业规格无效", "无效的请求", "请求被拒绝")
    english = api.get("/api/v1/no-such-operation/", HTTP_ACCEPT_LANGUAGE="en")
    assert english.json()["title"] == "Not found"


def test_api_answers_by_accept_language_not_the_preference(tenants):
    UserPreference.objects.create(user=tenants.alice, language="zh-hans")
    api = APIClient()
    api.force_authenticate(tenants.alice)
    assert api.get("/api/v1/no-such-operation/", HTTP_ACCEPT_LANGUAGE="en").json()["title"] == "Not found"


@pytest.mark.parametrize(("amount", "currency", "shown"), [
    (Decimal("1234.5"), "CNY", "¥1,234.50"),
    (Decimal("1234.505"), "USD", "$1,234.51"),
    (Decimal("-0.5"), "CNY", "-¥0.50"),
    (Decimal("1000000"), "CHF", "1,000,000.00 CHF"),
])
def test_money_is_shown_with_its_currency(amount, currency, shown):
    assert money(amount, currency) == shown


def test_a_day_is_written_for_the_reader():
    with translation.override("zh-hans"):
        assert long_date(date(2026, 11, 24)) == "2026年11月24日"
    with translation.override("en"):
        assert long_date(date(2026, 11, 24)) == "24 Nov 2026"


def test_the_workspace_page_uses_the_glossary_terms(client, cluster):
    client.force_login(cluster.alice)
    page = client.get("/w/vision-lab/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "应得配额" in page and "队列" in page and "所有者" in page
