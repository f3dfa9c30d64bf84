"""The labellers that store what the visage pull and salience read (``ItemFeature``), and starting one
over a study from its findings page.

A registered labeller of kind ``clip`` stores each image's embedding while it runs, one of kind
``captioner`` its captions (``labelling.services._store_features``), unless its configuration says
``store_features: false``. ``feature_labellers`` lists the enabled ones an admin registered;
``feature_labelling_job_create`` queues one over every item of a study, the same job the labelling page
starts (``labelling_job_create``).
"""

from __future__ import annotations

from annotations.models import Annotator, ItemFeature, Study, User
from common.errors import ValidationFailed
from labelling.models import LabellingJob
from labelling.services import labelling_job_create

# What each kind stores -> the labeller kinds (``labelling.labellers.registry``) that store it.
FEATURE_KINDS: dict[str, tuple[str, ...]] = {
    ItemFeature.Kind.EMBEDDING.value: ("clip",),
    ItemFeature.Kind.CAPTIONS.value: ("captioner",),
}
WHAT = {ItemFeature.Kind.EMBEDDING.value: "image embeddings", ItemFeature.Kind.CAPTIONS.value: "captions"}


def feature_labellers(kind: str) -> list[Annotator]:
    """Enabled, registered labellers that store features of ``kind`` (``embedding`` or ``captions``)."""
    if kind not in FEATURE_KINDS:
        raise ValidationFailed(f"unknown feature kind {kind!r}; use {' or '.join(FEATURE_KINDS)}")
    found = Annotator.objects.filter(
        kind=Annotator.Kind.MACHINE,
        study__isnull=True,
        disabled=False,
        config__kind__in=FEATURE_KINDS[kind],
    ).order_by("name", "-created_at")
    return [annotator for annotator in found if annotator.config.get("store_features") is not False]


def feature_labelling_job_create(
    *, study: Study, annotator_id: int, kind: str, user: User | None
) -> LabellingJob:
    """Queue the registered labeller ``annotator_id`` over every item of ``study`` to store ``kind``
    features; refused, with the reason, for a labeller that does not store them (or is disabled)."""
    offered = {annotator.pk: annotator for annotator in feature_labellers(kind)}
    annotator = offered.get(annotator_id)
    if annotator is None:
        raise ValidationFailed(
            f"that is no enabled labeller storing {WHAT[kind]}; an admin registers one of kind "
            f"{' or '.join(FEATURE_KINDS[kind])} on the labellers page",
            {"annotator": "invalid"},
        )
    return labelling_job_create(study=study, annotator=annotator, user=user)
