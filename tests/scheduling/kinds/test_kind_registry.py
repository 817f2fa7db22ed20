"""The kinds' registry and what each built-in kind answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from scheduling import kinds
from scheduling.backends.base import BATCH, JUPYTER, MODEL_SERVER
from scheduling.kinds.base import (
    IDLE_CANCEL,
    IDLE_STOP,
    OVERDUE_FAIL,
    OVERDUE_STOP,
    RATES_NONE,
    RATES_PER_HOUR,
    RATES_PER_REPLICAS,
    Kind,
)
from scheduling.models import IdleAction, Job
from scheduling.spec.workloads import NOTEBOOK_QUOTE_S

NOON = datetime(2030, 1, 1, 12, tzinfo=UTC)


def pool(action=IdleAction.NOTIFY, *, stop_training=False, grace=30):
    return SimpleNamespace(idle_action=action, idle_stop_training=stop_training, idle_grace_min=grace)


def test_the_built_in_kinds_are_registered_by_name_and_training_is_the_default():
    assert kinds.names() == ("training", "notebook", "inference")
    assert [k.name for k in kinds.all()] == list(kinds.names())
    assert kinds.get(None) is kinds.get("") is kinds.get(kinds.DEFAULT) is kinds.get("training")
    assert kinds.kind_of(SimpleNamespace(kind="notebook")) is kinds.get("notebook")
    assert kinds.find("nope") is None and kinds.find(3) is None
    with pytest.raises(KeyError):
        kinds.get("nope")


def test_the_job_kind_choices_come_from_the_registry():
    assert kinds.choices() == [("training", "Training"), ("notebook", "Notebook"),
                               ("inference", "Inference service")]
    assert Job._meta.get_field("kind").choices == kinds.choices()
    assert Job(kind="inference").get_kind_display() == "Inference service"


def test_a_kind_registers_once_and_unregisters():
    class Extra(Kind):
        name = "extra"

    extra = kinds.register(Extra())
    try:
        assert kinds.get("extra") is extra and kinds.names()[-1] == "extra"
        assert kinds.register(extra) is extra  # the same object again: no change
        with pytest.raises(ValueError, match="already registered"):
            kinds.register(Extra())
        assert ("extra", "") in kinds.choices()
    finally:
        kinds.unregister("extra")
    assert kinds.find("extra") is None
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(type("Other", (Kind,), {"name": "notebook"})())


def test_names_where_selects_kinds_by_what_they_answer():
    assert kinds.names_where(interactive=True) == ["notebook", "inference"]
    assert kinds.names_where(autoscaled=True) == ["inference"]
    assert kinds.names_where(idle_by_activity=True) == ["notebook"]
    assert kinds.names_where(listed_on="notebooks", stoppable=True) == ["notebook"]
    assert kinds.names_where(listed_on="nowhere") == []


def test_the_registry_answers_which_kinds_a_query_asks_for():
    assert kinds.listed_on("notebooks") == ["notebook"] and kinds.listed_on("jobs") == ["training"]
    assert kinds.listed_on("nowhere") == []
    assert kinds.autoscaled() == ["inference"]
    assert kinds.idled_by_activity() == ["notebook"]
    assert kinds.personal() == ["notebook"]


def test_a_new_kind_is_found_by_the_questions_its_facts_answer():
    extra = kinds.register(type("Extra", (Kind,), {"name": "extra", "autoscaled": True, "listed_on": "services"})())
    try:
        assert kinds.autoscaled() == ["inference", "extra"]
        assert kinds.listed_on("services") == ["inference", "extra"]
        assert extra.scale_target(SimpleNamespace()) is None  # the autoscaler's target is the kind's own to say
    finally:
        kinds.unregister("extra")


def test_each_kind_answers_the_questions_of_the_layers_above():
    job = SimpleNamespace(name="lab")
    training, notebook, service = (kinds.get(n) for n in ("training", "notebook", "inference"))
    assert [k.runs_ssh_server(job) for k in (training, notebook, service)] == [True, True, False]
    assert [k.home_volume(job) for k in (training, notebook, service)] == [None, "lab", None]
    spec = SimpleNamespace(inference=SimpleNamespace(target_metric="concurrency", target_value="4"))
    assert [k.scale_target(spec) for k in (training, notebook)] == [None, None]
    assert service.scale_target(spec) == ("concurrency", 4.0)
    assert [k.idle_rule("gpus", "server") for k in (training, notebook, service)] == ["gpus", "server", "gpus"]
    ended = []
    for kind in (training, notebook, service):
        kind.end_idle(job, "idle", stop=lambda j, why: ended.append(("stop", why)),
                      cancel=lambda j, why: ended.append(("cancel", why)))
    assert ended == [("cancel", "idle"), ("stop", "idle"), ("cancel", "idle")]


@pytest.mark.parametrize(("name", "taken"), [("training", False), ("notebook", True), ("inference", True)])
def test_a_kind_whose_name_picks_a_url_refuses_a_name_a_live_job_has(name, taken):
    spec, workspace, asked = SimpleNamespace(name="lab"), SimpleNamespace(slug="team"), []

    def live_state():
        asked.append(True)
        return "running"

    kind = kinds.get(name)
    assert kind.name_refusal(spec, workspace, lambda: None) is None  # no live job of the name: every kind takes it
    refusal = kind.name_refusal(spec, workspace, live_state)
    if not taken:
        assert refusal is None and asked == []  # names may repeat: nothing is looked up
    else:
        assert "'lab' already exists in workspace 'team' (running)" in refusal


@pytest.mark.parametrize(("name", "answers"), [
    ("training", dict(interactive=False, off_peak=True, stoppable=False, name_taken=None, quote_duration_s=None,
                      launch_shape=BATCH, autoscaled=False, has_home=False, idle_by_activity=False,
                      idle_action=IDLE_CANCEL, idle_needs_pool_consent=True, quote_rates=RATES_NONE,
                      form_fields=None, listed_on="jobs", resource_type="Training job")),
    ("notebook", dict(interactive=True, off_peak=False, stoppable=True, quote_duration_s=NOTEBOOK_QUOTE_S,
                      launch_shape=JUPYTER, autoscaled=False, has_home=True, idle_by_activity=True,
                      idle_action=IDLE_STOP, idle_needs_pool_consent=False, quote_rates=RATES_PER_HOUR,
                      listed_on="notebooks", resource_type="Notebook")),
    ("inference", dict(interactive=True, off_peak=False, stoppable=True, quote_duration_s=None,
                       launch_shape=MODEL_SERVER, autoscaled=True, has_home=False, idle_by_activity=False,
                       idle_action=IDLE_CANCEL, idle_needs_pool_consent=False, quote_rates=RATES_PER_REPLICAS,
                       listed_on="services", resource_type="Inference service")),
])
def test_each_kind_answers(name, answers):
    kind = kinds.get(name)
    assert {key: getattr(kind, key) for key in answers} == answers
    assert repr(kind) == f"<kind {name}>"


def test_the_notebook_and_service_kinds_have_a_tab_and_say_their_name_is_taken():
    notebook, service = kinds.get("notebook"), kinds.get("inference")
    assert {"homeSize", "idleAfter", "image", "gpus"} <= set(notebook.form_fields)
    assert {"modelPath", "minReplicas", "targetValue", "gpus"} <= set(service.form_fields)
    assert notebook.form_default_name({"image": "hf.co/team/Lab-Image:1"}) == "lab-image"
    assert notebook.form_default_name({}) == "pytorch-notebook"
    assert service.form_default_name({"modelPath": "/models/llama-3-8b"}) == "llama-3-8b"
    assert service.form_default_name({}) == "service"
    assert "notebook '%(name)s' already exists" in notebook.name_taken
    assert "service '%(name)s' already exists" in service.name_taken


def test_idle_rules_per_kind():
    training, notebook, service = (kinds.get(n) for n in ("training", "notebook", "inference"))
    notify, then_stop = pool(), pool(IdleAction.NOTIFY_THEN_STOP)
    # training: stopped only where the pool notifies then stops and allows stopping training
    assert not training.idle_may_stop(notify) and not training.idle_may_stop(then_stop)
    assert training.idle_may_stop(pool(IdleAction.NOTIFY_THEN_STOP, stop_training=True))
    # a service: wherever the pool stops; a notebook: always, by its own rule
    assert not service.idle_may_stop(notify) and service.idle_may_stop(then_stop)
    assert notebook.idle_may_stop(notify) and notebook.idle_may_stop(then_stop)
    # a notebook stops with the notice unless the pool notifies first; others after the grace
    assert notebook.idle_stop_at(NOON, notify) == NOON
    assert notebook.idle_stop_at(NOON, then_stop) == NOON + timedelta(minutes=30)
    assert training.idle_stop_at(NOON, then_stop) == service.idle_stop_at(NOON, then_stop) == NOON + timedelta(
        minutes=30)


def test_a_run_past_its_max_runtime_is_stopped_only_where_the_kind_stops_and_starts():
    assert [k.overdue_action() for k in kinds.all()] == [OVERDUE_FAIL, OVERDUE_STOP, OVERDUE_STOP]


def test_pages_and_process_metrics():
    job = SimpleNamespace(pk=7, workspace=SimpleNamespace(slug="vision-lab"))
    assert kinds.get("training").page_url(job) == "/jobs/7/"
    assert kinds.get("notebook").page_url(job) == "/notebooks/?workspace=vision-lab"
    assert kinds.get("training").process_metrics(None, (7, "main", 0), "vision-lab", "x") == {}

    class Backend:
        def __init__(self, found):
            self.found, self.asked = found, []

        def endpoint(self, key, *, workspace, base_url):
            self.asked.append(base_url)
            return self.found

    listening = SimpleNamespace(url="http://127.0.0.1:9/nb/vision-lab/lab/", token="")
    backend = Backend(listening)
    figures = kinds.get("notebook").process_metrics(backend, (7, "notebook", 0), "vision-lab", "lab")
    assert figures["metrics_url"] == listening.url + "metrics?format=json"
    assert figures["metrics_auth"].startswith("token ") and backend.asked == ["/nb/vision-lab/lab/"]
    figures = kinds.get("inference").process_metrics(Backend(SimpleNamespace(url="http://h/", token="k")),
                                                       (7, "server", 0), "vision-lab", "chat")
    assert figures == {"metrics_url": "http://h/metrics?format=json", "metrics_auth": "Bearer k"}
    assert kinds.get("inference").process_metrics(Backend(None), (7, "server", 0), "vision-lab", "chat") == {}


@pytest.mark.parametrize("attribute, value", [("idle_action", "hibernate"), ("quote_rates", "per-day"),
                                              ("listed_on", "models")])
def test_a_kind_naming_a_value_nothing_acts_on_fails_where_it_is_written(attribute, value):
    with pytest.raises(TypeError, match=f"{attribute} = '{value}', not one of"):
        type("Odd", (Kind,), {"name": "odd", attribute: value})
    assert kinds.find("odd") is None


# (kind, what is asked) -> the refusal's words, or None where the kind does it
REFUSALS = [
    ("training", "check_stop_start", "a training job, which does not stop and start"),
    ("notebook", "check_stop_start", None),
    ("inference", "check_stop_start", None),
    ("training", "check_home", "a training job, which has no home volume"),
    ("notebook", "check_home", None),
    ("inference", "check_home", "an inference service, which has no home volume"),
    ("training", "check_scaled", "a training job, which the autoscaler does not size"),
    ("notebook", "check_scaled", "a notebook, which the autoscaler does not size"),
    ("inference", "check_scaled", None),
    ("training", "check_keep_alive", "a training job cannot be kept alive"),
    ("notebook", "check_keep_alive", None),
    ("inference", "check_keep_alive", "an inference service cannot be kept alive"),
]


@pytest.mark.parametrize(("name", "asked", "refusal"), REFUSALS)
def test_each_kind_refuses_in_its_own_words_what_it_does_not_do(name, asked, refusal):
    from scheduling.errors import Conflict, DomainError

    job = SimpleNamespace(pk=7, kind=name)
    check = getattr(kinds.get(name), asked)
    args = (job, "keep_alive_until") if asked == "check_keep_alive" else (job,)
    if refusal is None:
        assert check(*args) is None
        return
    with pytest.raises(DomainError, match=refusal) as refused:
        check(*args)
    assert list(refused.value.errors) == ["keep_alive_until" if asked == "check_keep_alive" else "kind"]
    assert isinstance(refused.value, Conflict) is (asked != "check_keep_alive")


def test_only_work_that_ends_may_have_a_schedule():
    assert kinds.get("training").schedule_refusal() is None
    assert "schedule does not apply to a notebook" in kinds.get("notebook").schedule_refusal()
    assert "schedule does not apply to an inference service" in kinds.get("inference").schedule_refusal()


def test_a_new_stoppable_kind_stops_without_any_caller_naming_it():
    class Desktop(Kind):
        name, noun, stoppable, has_home = "desktop", "a desktop", True, True

    desktop = Desktop()
    job = SimpleNamespace(pk=3, kind="desktop")
    assert desktop.check_stop_start(job) is None and desktop.check_home(job) is None
    assert "a desktop" in desktop.schedule_refusal()
