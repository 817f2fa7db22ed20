"""Spec helpers for the Submit page: the image form's values for a spec (the other way round from
`specs/image-form/`, so that the form follows the YAML)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.fields import SpecField
from portal.selectors import get_workspace_for_user
from portal.submit_page import image_form_for


class ImageFormValuesInput(serializers.Serializer):
    workspace = serializers.SlugField()
    spec = SpecField(help_text="The task YAML as text, or a JSON object of the same fields")


class ImageFormValuesOutput(serializers.Serializer):
    form = serializers.DictField(child=serializers.CharField(allow_blank=True),
                                 help_text="Image form fields as text (blank: the default)")
    not_in_form = serializers.ListField(child=serializers.CharField(),
                                        help_text="What of the spec the form cannot show")
    duration_hours = serializers.CharField(allow_null=True, help_text="The spec's expectedDuration in hours, "
                                                                      "null when it states none")


class ImageFormValuesApi(APIView):
    """A spec read into the image form's fields (checked as YAML only, not against the cluster)."""

    token_scopes = {"POST": "read"}  # changes nothing

    @extend_schema(request=ImageFormValuesInput, responses={200: ImageFormValuesOutput})
    def post(self, request):
        body = ImageFormValuesInput(data=request.data)
        body.is_valid(raise_exception=True)
        get_workspace_for_user(request.user, body.validated_data["workspace"])
        return Response(image_form_for(body.validated_data["spec"]))
