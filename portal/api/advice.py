"""GPU advice for inference: the page's figures as JSON (`portal/inference_advice.py`)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.inference_advice import LIMITS, PRECISIONS, inference_advice
from scheduling.api import MAX_PARAMS_B


class InferenceAdviceQuery(serializers.Serializer):
    # a number in the schema (a decimal string's pattern would allow 0 and negatives)
    params_b = serializers.FloatField(min_value=0.000001, max_value=float(MAX_PARAMS_B),
                                      help_text="Model size, billions of parameters (above 0)")
    precision = serializers.ChoiceField(choices=PRECISIONS)
    context = serializers.IntegerField(min_value=1, max_value=LIMITS["context"], help_text="Tokens per sequence")
    concurrency = serializers.IntegerField(min_value=1, max_value=LIMITS["concurrency"], default=1,
                                           help_text="Sequences served at once")
    layers = serializers.IntegerField(min_value=1, max_value=LIMITS["layers"], required=False,
                                      help_text="Default: from the size, by the rule of thumb")
    hidden = serializers.IntegerField(min_value=1, max_value=LIMITS["hidden"], required=False,
                                      help_text="The KV width (hidden size; smaller with grouped-query attention)")


class InferenceAdviceApi(APIView):
    """The GPU memory a model needs to serve a context to a number of sequences at once, and the
    smallest fraction, MIG profile and whole-GPU count of each pool the caller's workspaces can use."""

    @extend_schema(parameters=[InferenceAdviceQuery], responses={200: dict})
    def get(self, request):
        # A plain dict: an empty value is refused, where a form would take it as unset.
        query = InferenceAdviceQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            advice = inference_advice(request.user, params_b=str(data["params_b"]), precision=data["precision"],
                                      context=data["context"], concurrency=data["concurrency"],
                                      layers=data.get("layers"), hidden=data.get("hidden"))
        except ValueError as error:
            field, _, message = str(error).partition(": ")
            raise ValidationError({field: [message]} if message else [str(error)]) from error
        return Response(advice.to_json())
