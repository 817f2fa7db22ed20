"""Quotes API: what each way of running a spec costs, before submitting it."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.services import quote_for_workspace
from portal.api.jobs import JobSubmitInput
from portal.selectors import get_workspace_for_user


class QuoteApi(APIView):
    token_scopes = {"POST": "read"}  # a price, nothing changes

    @extend_schema(request=JobSubmitInput, responses={200: dict})
    def post(self, request):
        body = JobSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = get_workspace_for_user(request.user, body.validated_data["workspace"])
        _, quote = quote_for_workspace(workspace, body.validated_data["spec"],
                                       duration_hours=body.validated_data.get("duration_hours"))
        return Response(quote.to_json())
