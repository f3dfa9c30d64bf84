"""The row locks that writes take, named once (``select_for_update``), and the order they are taken in.

A write that needs more than one lock takes them in this order, so two writes never wait on each
other in opposite orders (a deadlock on PostgreSQL):

1. the study (:func:`study_lock`, :func:`study_lock_only`): settings, launch, consensus rules, the
   validation sample, quality settings, the first control;
2. an item (:func:`item_lock`, :func:`item_lock_or_none`): its control answers, a skip undone, an
   item handed out again;
3. an assignment: the claim and submit hot path takes its assignment rows inside its own prepared
   queries (``annotations/services/assignment.py``, explained in ``assignment.md``), after any item.

On SQLite a write transaction holds the whole database (``workbench/sqlite_backend``), so these
locks cost nothing there and the order holds trivially.
"""

from __future__ import annotations

from annotations.models import Item, Study


def study_lock(study_id: int) -> Study:
    """Lock the study's row for the rest of the transaction and answer it, read fresh."""
    return Study.objects.select_for_update().get(pk=study_id)


def study_lock_only(study_id: int) -> None:
    """Lock the study's row without reading it (a write that only needs writes on the study to wait)."""
    Study.objects.select_for_update().filter(pk=study_id).values_list("pk").get()


def item_lock(item_id: int) -> Item:
    """Lock an item's row and answer it, read fresh (``Item.DoesNotExist`` when it is gone)."""
    return Item.objects.select_for_update().get(pk=item_id)


def item_lock_or_none(item_id: int) -> Item | None:
    """Lock an item's row and answer it, or None when it is gone."""
    return Item.objects.select_for_update().filter(pk=item_id).first()
