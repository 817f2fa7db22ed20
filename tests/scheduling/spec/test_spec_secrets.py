"""Secrets in a spec: `env: {HF_TOKEN: {secret: hf-token}}` beside plain values and `secretMounts`, in every
kind; a name the workspace has not is a field error with its line and column; they survive the round trip."""

from __future__ import annotations

import pytest

from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict

TRAINING = """\
name: fine-tune
roles:
  - name: main
    image: registry.example.com/team/train:1
    env:
      EPOCHS: 3
      HF_TOKEN: {secret: hf-token}
    secretMounts:
      - {secret: kaggle, mountPath: /etc/kaggle}
    resources: {gpu: 1}
"""
KNOWN = ["hf-token", "kaggle"]


def test_env_and_mounts_read_names_beside_plain_values():
    spec = parse_job_spec(TRAINING, workspace_secrets=KNOWN)
    role = spec.roles[0]
    assert role.env == (("EPOCHS", "3"),)
    assert role.secret_env == (("HF_TOKEN", "hf-token"),)
    assert role.secret_mounts == (("kaggle", "/etc/kaggle"),)
    assert role.secret_names == {"hf-token", "kaggle"}


def test_the_round_trip_keeps_the_references():
    spec = parse_job_spec(TRAINING, workspace_secrets=KNOWN)
    written = spec_to_dict(spec)
    assert written["roles"][0]["env"] == {"EPOCHS": "3", "HF_TOKEN": {"secret": "hf-token"}}
    assert written["roles"][0]["secretMounts"] == [{"secret": "kaggle", "mountPath": "/etc/kaggle"}]
    assert parse_job_spec_obj(written, workspace_secrets=KNOWN) == spec


def test_an_unknown_secret_is_an_error_at_its_line_and_column():
    with pytest.raises(SpecError) as refused:
        parse_job_spec(TRAINING, workspace_secrets=["hf-tokens"])
    found = {(e.line, e.column, e.field) for e in refused.value.errors}
    assert (7, 26, "roles[0].env.HF_TOKEN.secret") in found
    assert (9, 18, "roles[0].secretMounts[0].secret") in found
    assert any("no secret 'hf-token'" in e.message and "did you mean 'hf-tokens'" in e.message
               for e in refused.value.errors)


def test_without_a_workspace_the_names_are_not_checked():
    assert parse_job_spec(TRAINING).roles[0].secret_env == (("HF_TOKEN", "hf-token"),)


@pytest.mark.parametrize(("fragment", "field"), [
    ("HF_TOKEN: {secret: HF}", "roles[0].env.HF_TOKEN.secret"),
    ("HF_TOKEN: {secrets: hf-token}", "roles[0].env.HF_TOKEN.secrets"),
    ("HF_TOKEN: {}", "roles[0].env.HF_TOKEN.secret"),
])
def test_a_bad_reference_is_a_field_error(fragment, field):
    text = TRAINING.replace("HF_TOKEN: {secret: hf-token}", fragment)
    with pytest.raises(SpecError) as refused:
        parse_job_spec(text, workspace_secrets=KNOWN)
    assert field in {e.field for e in refused.value.errors}


@pytest.mark.parametrize(("mounts", "field", "words"), [
    ("[{secret: kaggle}]", "roles[0].secretMounts[0].mountPath", "required"),
    ("[{secret: kaggle, mountPath: etc/kaggle}]", "roles[0].secretMounts[0].mountPath", "absolute path"),
    ("[{secret: kaggle, mountPath: /etc/../root}]", "roles[0].secretMounts[0].mountPath", "'..'"),
    ("[{secret: kaggle, mountPath: /a}, {secret: hf-token, mountPath: /a/}]", "roles[0].secretMounts[1].mountPath",
     "mounted twice"),
    ("{secret: kaggle, mountPath: /a}", "roles[0].secretMounts", "must be a list"),
    ("[{mountPath: /a}]", "roles[0].secretMounts[0].secret", "required"),
])
def test_bad_mounts_are_field_errors(mounts, field, words):
    text = TRAINING.replace("""    secretMounts:
      - {secret: kaggle, mountPath: /etc/kaggle}
""", f"    secretMounts: {mounts}\n")
    with pytest.raises(SpecError) as refused:
        parse_job_spec(text, workspace_secrets=KNOWN)
    errors = {e.field: e.message for e in refused.value.errors}
    assert field in errors and words in errors[field], errors


def test_notebooks_and_services_take_secrets_too():
    notebook = parse_job_spec("kind: notebook\nname: nb\nenv: {HF_TOKEN: {secret: hf-token}}\n"
                              "secretMounts: [{secret: kaggle, mountPath: /home/jovyan/.kaggle}]\n",
                              workspace_secrets=KNOWN)
    assert notebook.roles[0].secret_env == (("HF_TOKEN", "hf-token"),)
    assert notebook.roles[0].secret_mounts == (("kaggle", "/home/jovyan/.kaggle"),)
    assert parse_job_spec_obj(spec_to_dict(notebook), workspace_secrets=KNOWN) == notebook
    service = parse_job_spec("kind: inference\nname: llm\nmodel: {registry: hf.co/org/m}\n"
                             "env: {HF_TOKEN: {secret: hf-token}}\n", workspace_secrets=KNOWN)
    assert service.roles[0].secret_env == (("HF_TOKEN", "hf-token"),)
    with pytest.raises(SpecError) as refused:
        parse_job_spec("kind: notebook\nname: nb\nenv: {HF_TOKEN: {secret: nope}}\n", workspace_secrets=KNOWN)
    assert [(e.line, e.field) for e in refused.value.errors] == [(3, "env.HF_TOKEN.secret")]
