"""REST API of protocols: the presets, one preset in full, and checking a protocol's YAML."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.api import serializers as s
from annotations.api.parsers import CheckedJSONParser
from common.errors import NotFoundError
from protocols.schema import list_presets, load_preset, load_protocol_text


class PresetListView(APIView):
    @extend_schema(operation_id="presets_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        presets = []
        for key in list_presets():
            protocol = load_preset(key)
            presets.append(
                {
                    "key": key,
                    "name": protocol.name,
                    "paper": protocol.paper,
                    "unit": protocol.unit,
                    "questions": len(protocol.questions),
                }
            )
        return Response(presets)


class PresetDetailView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, key: str) -> Response:
        if key not in list_presets():
            raise NotFoundError(f"no preset {key!r}")
        return Response(load_preset(key).to_dict())


class ProtocolValidateView(APIView):
    parser_classes = [CheckedJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        request=s.ProtocolValidateSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="error")},
    )
    def post(self, request: Request) -> Response:
        data = s.ProtocolValidateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        protocol = load_protocol_text(data.validated_data["protocol_yaml"], source="protocol")
        return Response({"valid": True, "protocol": protocol.to_dict()})
