"""The portal's PlainSelect gives the HTML Django's Select gives (as a browser reads it), escaping included."""

import pytest
from django import forms
from django.test.html import parse_html

from portal.widgets import PlainSelect

CASES = [
    pytest.param([("", "all"), ("a<b", "A & B"), ("x", 'X "quoted"')], "x", id="flat"),
    pytest.param([("", "all"), ("x", "X")], "", id="nothing-chosen"),
    pytest.param([("G<1>", [("1", "one"), ("2", "two")]), ("3", "three")], "2", id="groups"),
    pytest.param([("1", "one"), ("2", "two")], "<script>", id="unknown-value"),
]


@pytest.mark.parametrize(("choices", "value"), CASES)
def test_the_same_select_as_django_renders(choices, value):
    attrs = {"id": "id_f", "class": "wide", "required": True, "disabled": False}
    django_html = forms.Select(choices=choices, attrs=attrs).render("f", value)
    plain_html = PlainSelect(choices=choices, attrs=attrs).render("f", value)
    assert parse_html(plain_html) == parse_html(django_html)
    assert "<script>" not in plain_html and 'X "quoted"' not in plain_html


def test_a_form_field_renders_through_it():
    class Filters(forms.Form):
        state = forms.ChoiceField(choices=[("", "all"), ("Running", "Running")], required=False, widget=PlainSelect)

    html = str(Filters({"state": "Running"})["state"])
    assert parse_html(html) == parse_html('<select name="state" id="id_state">'
                                          '<option value="">all</option><option value="Running" selected>Running</option>'
                                          '</select>')
