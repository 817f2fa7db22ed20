"""Every API error reads well: problem details with a formatted title on /api/, and the OpenAI error
shape on /serve/ (its callers are OpenAI clients), whatever the status."""

import uuid

import pytest
from django.conf import settings
from django.test import Client, override_settings

from portal.services import create_api_token


@pytest.fixture
def client():  # an address of its own: rate limits are counted in the shared Redis
    return Client(REMOTE_ADDR=f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}")


def _no_placeholder(body: dict) -> None:
    for key in ("title", "detail"):
        assert "{" not in body[key] and "}" not in body[key], body


@pytest.mark.django_db
def test_method_not_allowed_has_a_formatted_title(client, tenants):
    client.force_login(tenants.alice)
    response = client.delete("/api/v1/workspaces/")
    assert response.status_code == 405 and response["Content-Type"] == "application/problem+json"
    body = response.json()
    _no_placeholder(body)
    assert body["title"] == "Method not allowed" and body["detail"] == 'Method "DELETE" not allowed.'
    assert body["type"] == "urn:gpu-platform:problem:method-not-allowed" and "GET" in response["Allow"]


@pytest.mark.django_db
def test_unsupported_media_type_has_a_formatted_title(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    response = client.post("/api/v1/jobs/", "<spec/>", content_type="application/xml",
                           HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 415
    body = response.json()
    _no_placeholder(body)
    assert body["title"] == "Unsupported media type" and "application/xml" in body["detail"]


def _openai_error(response, status: int, kind: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["type"] == kind and error["message"], error
    return error


@pytest.mark.django_db
def test_serve_answers_its_errors_in_the_openai_shape(client, tenants):
    url = "/serve/vision-lab/llm/v1/models"
    _openai_error(client.get(url), 401, "authentication_error")
    _openai_error(client.get(url, HTTP_AUTHORIZATION="Bearer gpt_not-a-token"), 401, "authentication_error")
    _, reader = create_api_token(tenants.alice, "read only", scope="read")
    _openai_error(client.get(url, HTTP_AUTHORIZATION=f"Bearer {reader}"), 403, "permission_error")
    _, secret = create_api_token(tenants.alice, "ci")
    _openai_error(client.get(url, HTTP_AUTHORIZATION=f"Bearer {secret}"), 404, "not_found_error")
    _openai_error(client.generic("TRACE", url, HTTP_AUTHORIZATION=f"Bearer {secret}"), 405,
                  "invalid_request_error")
    _openai_error(client.get("/serve/vision-lab/", HTTP_AUTHORIZATION=f"Bearer {secret}"), 404, "not_found_error")


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.django_db
def test_serve_answers_an_oversized_body_with_413_in_the_openai_shape(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    response = client.post("/serve/vision-lab/llm/v1/completions", {"prompt": "x" * 5000},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}")
    _openai_error(response, 413, "invalid_request_error")


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "serve": "2/60"})
@pytest.mark.django_db
def test_serve_is_limited_per_caller_and_service(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    _, other_tenant = create_api_token(tenants.bob, "bob's")
    url = "/serve/vision-lab/llm/v1/models"
    for spelling in ("Bearer", "bearer"):
        assert client.get(url, HTTP_AUTHORIZATION=f"{spelling} {secret}").status_code == 404
    refused = client.get(url, HTTP_API_KEY=secret)  # the same token by another header: the same budget
    error = _openai_error(refused, 429, "rate_limit_error")
    assert error["code"] == "rate_limit_exceeded" and int(refused["Retry-After"]) >= 1
    # another service of the same caller, and another tenant's caller, have budgets of their own
    assert client.get("/serve/vision-lab/other/v1/models", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 404
    assert client.get("/serve/nlp-group/llm/v1/models", HTTP_AUTHORIZATION=f"Bearer {other_tenant}").status_code == 404
