"""Quotes API: what each way of running a spec costs, before submitting it."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.api import QuoteError, quote_for_workspace, quote_texts, service_rates
from portal.api.jobs import JobSubmitInput
from portal.selectors import get_workspace_for_user
from scheduling import kinds
from scheduling.api import secrets

DEFAULT_COMPLETION_TOKENS = 32   # the latency model's default answer length


class QuoteInput(JobSubmitInput):
    requests_per_second = serializers.FloatField(
        required=False, min_value=0, max_value=1_000_000,
        help_text="An inference service: also quote it at this steady request rate (`at_rate` per option: the "
                  "replicas its autoscaler settles at and their price per hour)")
    prompt_tokens_per_request = serializers.IntegerField(
        required=False, min_value=0, max_value=1_000_000,
        help_text="With requests_per_second: `at_rate` also gives each option's expected cost per 1M prompt, "
                  "completion and all tokens (prompt tokens 0 and completion tokens 32 when one of them is left out)")
    completion_tokens_per_request = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000)


class QuoteApi(APIView):
    token_scopes = {"POST": "read"}  # a price, nothing changes

    @extend_schema(request=QuoteInput, responses={200: dict})
    def post(self, request):
        body = QuoteInput(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        try:
            spec, quote = quote_for_workspace(workspace, body.validated_data["spec"],
                                              duration_hours=body.validated_data.get("duration_hours"))
        except QuoteError as error:  # why each pool cannot, in the request's language
            raise quote_texts.localized_error(error) from error
        # the kind tells a page how to read the rates: per hour for a notebook, at min and max for a service;
        # the English trade-offs and refusals keep their fields, *_text beside them are in the request's language
        # `rates`: how the page reads them (scheduling.kinds.base RATES_*)
        out = quote_texts.localized({**quote.to_json(), "kind": spec.kind, "rates": kinds.kind_of(spec).quote_rates})
        # which of the workspace's registry credentials pulls each image (none: a public image)
        out["image_pulls"] = secrets.image_pulls(workspace, spec)
        rate = body.validated_data.get("requests_per_second")
        given = body.validated_data
        per_token = "prompt_tokens_per_request" in given or "completion_tokens_per_request" in given
        rates = None if rate is None else service_rates(spec, quote, rate, **({
            "prompt_tokens": given.get("prompt_tokens_per_request", 0),
            "completion_tokens": given.get("completion_tokens_per_request", DEFAULT_COMPLETION_TOKENS),
        } if per_token else {}))
        if rates is not None:  # None: not a service (billing's service_rates asks the kind)
            for option in out["options"]:
                option["at_rate"] = rates.get(option["id"])
                option["at_rate_text"] = quote_texts.at_rate_text(option["at_rate"], quote.currency,
                                                                   out["duration_hours"])
        return Response(out)
