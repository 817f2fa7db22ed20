"""Spec errors in the reader's language: the same bad spec quoted through the API reads in Chinese with
Accept-Language: zh-hans and word for word as before in English; fields, lines and columns do not change."""

import pytest
from django.utils import translation
from rest_framework.test import APIClient

from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj
from scheduling.spec.cluster import ClusterInfo, PoolInfo

BAD = """\
name: Bad_Name
roles:
  - name: main
    image: pytorch/pytorch:2.4
    resources: {gpu: 1.5, cpu: lots}
    colour: blue
"""

ENGLISH = [
    (1, 7, "name", "name 'Bad_Name' is not valid: lowercase letters, digits and '-', at most 63, starting and "
                   "ending with a letter or digit"),
    (5, 22, "roles[0].resources.gpu", "roles[0].resources.gpu (1.5) must be a whole number of GPUs with "
                                      "roles[0].sharing exclusive; use sharing: fraction for part of a GPU"),
    (5, 32, "roles[0].resources.cpu", "roles[0].resources.cpu 'lots' is not a CPU amount (e.g. 4, 0.5 or 500m)"),
    (6, 5, "roles[0].colour", "unknown field 'colour' in a role (allowed: name, image, command, env, secretMounts, replicas, "
                              "sharing, resources, vendor, gpuModel, nodePool, volumes, buckets)"),
]


@pytest.fixture
def alice(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def quote(api, spec, language):
    return api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec}, format="json",
                    HTTP_ACCEPT_LANGUAGE=language)


def positions(body):
    return [(e["line"], e["column"], e["field"]) for e in body["errors"]]


def test_the_quotes_api_says_spec_errors_in_chinese_with_the_same_fields_and_positions(alice):
    english, chinese = quote(alice, BAD, "en"), quote(alice, BAD, "zh-hans")
    assert english.status_code == chinese.status_code == 400
    assert english["Content-Type"] == chinese["Content-Type"] == "application/problem+json"
    assert [(e["line"], e["column"], e["field"], e["message"]) for e in english.json()["errors"]] == ENGLISH
    body = chinese.json()
    assert positions(body) == positions(english.json())
    assert body["type"] == english.json()["type"] == "urn:gpu-platform:problem:spec-error"
    assert body["title"] == "作业规格无效"
    messages = [e["message"] for e in body["errors"]]
    assert messages[0] == "name 'Bad_Name' 无效：应为小写字母、数字和 '-'，最多 63 个字符，以字母或数字开头和结尾"
    assert messages[1].startswith("roles[0].resources.gpu（1.5）在 roles[0].sharing exclusive 时必须是整数块 GPU")
    assert messages[2] == "roles[0].resources.cpu 'lots' 不是 CPU 数量（例如 4、0.5 或 500m）"
    assert messages[3].startswith("角色 中有未知字段 'colour'（允许的字段：name, image,")
    assert "第 1 行第 7 列：name 'Bad_Name' 无效" in body["detail"]
    assert "line 1, col 7: name 'Bad_Name' is not valid" in english.json()["detail"]
    assert not any("must" in m or "is not" in m for m in messages)


def test_a_yaml_syntax_error_and_a_pool_no_one_has(alice):
    broken = quote(alice, "name: x\nroles: [unclosed\n", "zh-hans").json()["errors"]
    assert broken[0]["message"] == "YAML 语法：此处以 '[' 开始的列表没有以 ']' 结束"
    assert (broken[0]["line"], broken[0]["column"]) == (2, 8)
    assert quote(alice, "name: x\nroles: [unclosed\n", "en").json()["errors"][0]["message"] == \
        "YAML syntax: the list opened here with '[' is not closed with ']'"
    unknown_model = "name: x\nroles:\n  - name: main\n    image: a/b:1\n    gpuModel: A100-80G\n"
    english = quote(alice, unknown_model, "en").json()["errors"]
    chinese = quote(alice, unknown_model, "zh-hans").json()["errors"]
    assert english[0]["message"].startswith("role 'main': gpuModel 'A100-80G' is in no pool; did you mean "
                                            "'A100-80GB'? (models: ")
    assert chinese[0]["message"].startswith("角色 'main'：没有资源池提供 GPU 型号 'A100-80G'；是否指 'A100-80GB'？")
    assert positions({"errors": chinese}) == positions({"errors": english}) == [(5, 15, "roles[0].gpuModel")]


def test_a_json_body_without_positions_names_the_field_in_either_language():
    spec = {"name": "ok", "roles": [{"name": "main", "image": "a/b:1", "replicas": {"min": 3, "max": 2}}]}
    with translation.override("zh-hans"), pytest.raises(SpecError) as chinese:
        parse_job_spec_obj(spec)
    with translation.override("en"), pytest.raises(SpecError) as english:
        parse_job_spec_obj(spec)
    assert english.value.to_dicts() == [{"line": None, "column": None, "field": "roles[0].replicas.max",
                                         "message": "roles[0].replicas.max (2) is less than roles[0].replicas.min (3)"}]
    assert chinese.value.to_dicts()[0]["message"] == "roles[0].replicas.max（2）小于 roles[0].replicas.min（3）"


def test_the_language_is_the_one_active_when_the_spec_is_read():
    """Nothing is cached across languages: the same text read twice gives each reader their own."""
    cluster = ClusterInfo((PoolInfo("h100", "nvidia", "H100-80GB", 81920, 8),))
    text = "name: x\nroles:\n  - name: main\n    image: a/b:1\n    nodePool: a100\n"
    said = {}
    for language in ("zh-hans", "en", "zh-hans"):
        with translation.override(language), pytest.raises(SpecError) as error:
            parse_job_spec(text, cluster=cluster)
        said.setdefault(language, set()).add(error.value.errors[0].message)
    assert said["en"] == {"role 'main': nodePool 'a100' does not exist; did you mean 'h100'? (pools: h100)"}
    assert said["zh-hans"] == {"角色 'main'：资源池 'a100' 不存在；是否指 'h100'？（现有资源池：h100）"}


def test_the_submit_page_shows_spec_errors_in_the_users_language(client, cluster, clock):
    from portal.models import UserPreference

    UserPreference.objects.create(user=cluster.alice, language="zh-hans")
    client.force_login(cluster.alice)
    page = client.post("/submit/", {"workspace": "vision-lab", "spec": BAD}, HTTP_ACCEPT_LANGUAGE="en")
    assert page.status_code == 400
    text = page.content.decode()
    assert "不是 CPU 数量（例如 4、0.5 或 500m）" in text and "is not a CPU amount" not in text
    client.force_login(cluster.carol)  # a member with no preference: the browser's language
    text = client.post("/submit/", {"workspace": "vision-lab", "spec": BAD}, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "is not a CPU amount (e.g. 4, 0.5 or 500m)" in text


def test_a_yaml_parser_message_is_wrapped_in_the_readers_language():
    """A parser error the spec reader has no sentence of its own for: the parser's words (English) inside a
    sentence in the reader's language that names the line and column."""
    spec = "%YAML 1.1\n%YAML 1.1\n---\nname: a\n"
    for language, start in (("en", "YAML syntax: the parser stopped at line 2, column 1 (its words: "),
                            ("zh-hans", "YAML 语法：解析器停在第 2 行第 1 列（其原文：")):
        with translation.override(language), pytest.raises(SpecError) as caught:
            parse_job_spec(spec)
        [error] = caught.value.errors
        assert (error.line, error.column) == (2, 1)
        assert error.message.startswith(start), error.message
        assert "found duplicate YAML directive" in error.message
