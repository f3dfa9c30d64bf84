"""REST API reads of a study's records, filtered to what the account may see: items, annotations and
annotators."""

from __future__ import annotations

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import mixins, viewsets

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.api.filters import ScopedFilterSet
from annotations.models import Annotation, Annotator, Item


class ItemFilter(ScopedFilterSet):
    class Meta:
        model = Item
        fields = ["study", "condition", "model_name", "kind", "external_id", "is_reference", "control_kind"]


class ItemViewSet(viewsets.ReadOnlyModelViewSet[Item]):
    """Items of your studies (researchers)."""

    serializer_class = s.ItemSerializer
    filterset_class = ItemFilter

    def get_queryset(self) -> QuerySet[Item]:
        return access.items_for_user(request_user(self.request)).prefetch_related("images").order_by("id")


class AnnotationFilter(ScopedFilterSet):
    annotator_kind = filters.CharFilter(field_name="annotator__kind")

    class Meta:
        model = Annotation
        fields = ["study", "item", "question_key", "annotator", "annotator_kind", "source"]


class AnnotationViewSet(viewsets.ReadOnlyModelViewSet[Annotation]):
    """Researchers: annotations of their studies. Annotators: only their own."""

    serializer_class = s.AnnotationSerializer
    filterset_class = AnnotationFilter

    def get_queryset(self) -> QuerySet[Annotation]:
        return (
            access.annotations_for_user(request_user(self.request))
            .select_related("item", "annotator")
            .order_by("id")
        )


class AnnotatorViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Annotator]):
    """Annotators who answered in your studies, and registered machine labellers (researchers)."""

    serializer_class = s.AnnotatorSerializer
    filterset_fields = ["kind"]

    def get_queryset(self) -> QuerySet[Annotator]:
        if getattr(self, "swagger_fake_view", False):
            return Annotator.objects.none()
        user = request_user(self.request)
        if not user.is_researcher:
            return Annotator.objects.filter(user=user)
        studies = access.studies_for_user(user)
        answered = Annotation.objects.filter(study__in=studies).values("annotator_id")
        enrolled = Annotator.objects.filter(user__enrollments__study__in=studies).values("id")
        return (
            (
                Annotator.objects.filter(pk__in=answered)
                | Annotator.objects.filter(pk__in=enrolled)
                # Registered labellers (global); a file's machine names belong to its study.
                | Annotator.objects.filter(
                    kind=Annotator.Kind.MACHINE, study__isnull=True, config__has_key="kind"
                )
                | Annotator.objects.filter(kind=Annotator.Kind.MACHINE, study__in=studies)
            )
            .distinct()
            .order_by("kind", "name")
        )
