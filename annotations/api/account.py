"""REST API of the signed-in account (``/api/me/``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.access import request_user
from annotations.api import serializers as s


class MeView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=s.UserSerializer)
    def get(self, request: Request) -> Response:
        return Response(s.UserSerializer(request_user(request)).data)
