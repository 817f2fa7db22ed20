"""GPU advice for inference (`/advice/inference/`): a GET form (model size, precision, context length,
concurrency; optionally the model's layers and KV width) and what it needs: GPU memory broken down, and
the smallest slice of each pool the caller's workspaces can use. A bad query is a 400 beside its field."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_safe

from portal.inference_advice import DEFAULTS, LIMITS, PRECISIONS, inference_advice
from scheduling.api import parse_params


class InferenceAdviceForm(forms.Form):
    params_b = forms.CharField(label=_("Model size (billion parameters)"), max_length=32)
    precision = forms.ChoiceField(label=_("Precision"), choices=[(p, p) for p in PRECISIONS])
    context = forms.IntegerField(label=_("Context length (tokens)"), min_value=1, max_value=LIMITS["context"])
    concurrency = forms.IntegerField(label=_("Concurrent sequences"), min_value=1, max_value=LIMITS["concurrency"])
    layers = forms.IntegerField(label=_("Layers"), min_value=1, max_value=LIMITS["layers"], required=False)
    hidden = forms.IntegerField(label=_("KV width (hidden size)"), min_value=1, max_value=LIMITS["hidden"],
                                required=False)

    def clean_params_b(self):
        try:
            return parse_params(self.cleaned_data["params_b"])
        except ValueError as error:
            raise ValidationError(_("Enter a number of billions above 0 and at most 100000, e.g. 7 or 0.5.")) \
                from error


@require_safe
@login_required
def inference_advice_page(request):
    asked = any(key in request.GET for key in DEFAULTS)
    form = InferenceAdviceForm(request.GET if asked else None, initial=DEFAULTS)
    context = {"form": form, "advice": None, "asked": asked}
    if not asked:
        return render(request, "portal/advice_inference.html", context)
    if not form.is_valid():
        return render(request, "portal/advice_inference.html", context, status=400)
    data = form.cleaned_data
    try:
        context["advice"] = inference_advice(request.user, params_b=data["params_b"], precision=data["precision"],
                                             context=data["context"], concurrency=data["concurrency"],
                                             layers=data["layers"], hidden=data["hidden"])
    except ValueError as error:
        form.add_error(None, str(error))
        return render(request, "portal/advice_inference.html", context, status=400)
    return render(request, "portal/advice_inference.html", context)
