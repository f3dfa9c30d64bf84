"""REST API for crowd work: a study's invitation links (list, create, revoke) and its payment records."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.models import Annotator, Invitation
from annotations.selectors.invitations import invitation_state
from annotations.selectors.payments import payment_rows
from annotations.services.invitations import (
    MAX_ESTIMATED_MINUTES,
    MAX_QUOTA,
    MAX_USES,
    invitation_create,
    invitation_revoke,
)


class InvitationSerializer(serializers.ModelSerializer[Invitation]):
    url = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField()
    joined = serializers.IntegerField(read_only=True, required=False)

    class Meta:
        model = Invitation
        fields = [
            "id",
            "study",
            "label",
            "url",
            "token",
            "platform",
            "pool",
            "expires_at",
            "max_uses",
            "uses",
            "joined",
            "items_per_participant",
            "min_answered_items",
            "consent_text",
            "estimated_minutes",
            "demographics",
            "attributes",
            "completion_code",
            "completion_url",
            "created_at",
            "revoked_at",
            "state",
        ]

    @extend_schema_field(serializers.CharField())
    def get_url(self, invitation: Invitation) -> str:
        path = reverse("join", kwargs={"token": invitation.token})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    @extend_schema_field(serializers.ChoiceField(choices=["open", "expired", "used up", "revoked"]))
    def get_state(self, invitation: Invitation) -> str:
        return invitation_state(invitation, timezone.now())


class InvitationCreateSerializer(serializers.Serializer[Any]):
    # The metaclass takes declared fields off the class; the stubs see Field.label (a str) overridden.
    label = serializers.CharField(  # type: ignore[assignment]
        max_length=200, required=False, allow_blank=True, default=""
    )
    platform = serializers.ChoiceField(choices=Invitation.Platform.choices, default=Invitation.Platform.NONE)
    pool = serializers.ChoiceField(choices=Annotator.Pool.choices, default=Annotator.Pool.CROWD)
    expires_at = serializers.DateTimeField(required=False, help_text="Default: 14 days from now")
    max_uses = serializers.IntegerField(min_value=1, max_value=MAX_USES)
    items_per_participant = serializers.IntegerField(
        min_value=1, max_value=MAX_QUOTA, required=False, allow_null=True, default=None
    )
    min_answered_items = serializers.IntegerField(
        min_value=1,
        max_value=MAX_QUOTA,
        required=False,
        allow_null=True,
        default=None,
        help_text="Answered items needed for the completion code (default: the quota, or 1)",
    )
    consent_text = serializers.CharField(required=False, allow_blank=True, default="")
    estimated_minutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_ESTIMATED_MINUTES,
        required=False,
        allow_null=True,
        default=None,
        help_text="How long the study takes, shown on the consent page",
    )
    demographics = serializers.JSONField(
        required=False,
        default=list,  # type: ignore[arg-type]  # the stubs allow mapping defaults only; a JSON list is fine
        help_text="[{key, label, kind: choice|number|text, choices, required}]",
    )
    completion_code = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    completion_url = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    attributes = serializers.JSONField(
        required=False,
        default=dict,
        help_text='What everyone who joins by the link gets in the study, e.g. {"region": "South Asia"} (a '
        "rater pool); a key may not be a demographic question too",
    )


class StudyInvitationsView(APIView):
    """A study's invitation links (researchers who may change the study: the links are secrets)."""

    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        invitations = study.invitations.annotate(joined=Count("participants")).order_by("-created_at", "-id")
        return Response(InvitationSerializer(invitations, many=True, context={"request": request}).data)

    @extend_schema(request=InvitationCreateSerializer, responses={201: InvitationSerializer})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = InvitationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = dict(data.validated_data)
        values.setdefault("expires_at", timezone.now() + timedelta(days=14))
        invitation = invitation_create(study=study, created_by=request_user(request), **values)
        return Response(
            InvitationSerializer(invitation, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class InvitationRevokeView(APIView):
    @extend_schema(request=None, responses=InvitationSerializer)
    def post(self, request: Request, pk: int, invitation_id: int) -> Response:
        invitation = access.invitation_get_for_user(user=request_user(request), study_id=pk, id=invitation_id)
        invitation = invitation_revoke(invitation=invitation)
        return Response(InvitationSerializer(invitation, context={"request": request}).data)


class PaymentRecordSerializer(serializers.Serializer[Any]):
    annotator = serializers.CharField()
    pool = serializers.CharField()
    platform = serializers.CharField()
    participant_id = serializers.CharField()
    platform_study_id = serializers.CharField()
    session_id = serializers.CharField()
    assignment_id = serializers.CharField()
    invitation = serializers.CharField()
    items_completed = serializers.IntegerField()
    items_skipped = serializers.IntegerField()
    items_answered = serializers.IntegerField(
        allow_null=True, help_text="Participants: submitted items less failed attention checks"
    )
    items_required = serializers.IntegerField(
        allow_null=True, help_text="Participants: answered items the completion code needs"
    )
    completed = serializers.BooleanField(allow_null=True, help_text="Participants: given the completion code")
    items_timed = serializers.IntegerField()
    seconds_total = serializers.FloatField()
    seconds_median = serializers.FloatField(allow_null=True)
    first_activity = serializers.DateTimeField(allow_null=True)
    last_activity = serializers.DateTimeField(allow_null=True)
    joined_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)


class StudyPaymentsView(APIView):
    """Payment records of a study, one per person (the study's researchers)."""

    @extend_schema(responses=PaymentRecordSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        return Response(PaymentRecordSerializer(payment_rows(study), many=True).data)
