"""Counts of a study's items that change only when items change, kept in Django's cache (the task
page's "left", issue 17: flat with the study's size; docs/annotating.md, "Progress: done, skipped, left").

A count is dropped at once when items change: saving an item or a study (``post_save``, the only job
of these signals) and the item import (``forget_eligible_count``). With a shared cache
(``WORKBENCH_CACHE_URL``) that is at once on every node; with the embedded per-process cache, other
processes see the change when their entry runs out, at most ``ELIGIBLE_COUNT_SECONDS`` later.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db.models import Exists, OuterRef
from django.db.models.signals import post_save
from django.dispatch import receiver

from annotations.models import Item, Study, ValidationSampleItem

ELIGIBLE_COUNT_SECONDS = 30
"""How long a process keeps a study's count of items the claim rule could hand out (``eligible_count``);
dropped at once in that process when an item is saved or imported (docs/annotating.md, "Progress")."""


def _eligible_key(study_id: Any) -> str:
    return f"flow-eligible:{study_id}"


def forget_eligible_count(study_id: Any) -> None:
    """Drop the cached count of ``study_id``'s items a claim could hand out (items added or changed)."""
    cache.delete(_eligible_key(study_id))


@receiver(post_save, sender=Item, dispatch_uid="workbench-flow-eligible-item-saved")
@receiver(post_save, sender=Study, dispatch_uid="workbench-flow-eligible-study-saved")
def _forget_on_save(sender: Any, instance: Item | Study, **kwargs: Any) -> None:
    forget_eligible_count(instance.pk if isinstance(instance, Study) else instance.study_id)


def eligible_count(*, study: Study, expert: bool, sample: bool) -> int:
    """Items of ``study`` a claim could ever hand out to the pool: real (not control) items, expert-only
    ones for the expert pool only, only the validation sample's while there is one. The sample is
    counted each time (it is small); the whole study's count, O(items), is kept per process for
    ``ELIGIBLE_COUNT_SECONDS``."""
    items = Item.objects.filter(study=study, control_kind="")
    if not expert:
        items = items.filter(expert_only=False)
    if sample:
        return items.filter(
            Exists(ValidationSampleItem.objects.filter(sample_id=study.pk, item=OuterRef("pk")))
        ).count()
    key = _eligible_key(study.pk)
    stamp = study.created_at.isoformat() if study.created_at else ""
    cached = cache.get(key)
    if isinstance(cached, dict) and cached.get("stamp") == stamp and expert in cached:
        return int(cached[expert])
    count = items.count()
    entry = cached if isinstance(cached, dict) and cached.get("stamp") == stamp else {"stamp": stamp}
    entry[expert] = count
    cache.set(key, entry, ELIGIBLE_COUNT_SECONDS)
    return count
