"""Quotes API: what each way of running a spec costs, before submitting it."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.quotes import QuoteError
from billing.services import quote_for_workspace
from portal.api.jobs import JobSubmitInput, input_errors_response, message_error, spec_errors_response
from portal.selectors import get_workspace_for_user
from scheduling.spec import SpecError


class QuoteApi(APIView):
    @extend_schema(request=JobSubmitInput, responses={200: dict})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        if not body.is_valid():
            return input_errors_response(body)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        try:
            _, quote = quote_for_workspace(workspace, body.validated_data["spec"])
        except SpecError as error:
            return spec_errors_response(error)
        except QuoteError as error:
            return message_error("spec", str(error), status.HTTP_422_UNPROCESSABLE_ENTITY)
        return Response(quote.to_json())
