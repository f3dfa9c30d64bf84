"""API filters that never reveal what exists outside the caller's own rows (docs/security.md,
"No existence leaks through filters").

django-filter's default filter for a foreign key (``?study=ID``, ``?item=ID``, ``?annotator=ID``)
checks the id against the *whole* table: an unknown id answers 400 "Select a valid choice" while
another tenant's id passes and answers 200 with an empty list, so anyone could map which ids exist.
Here every relation is filtered as a plain whole number on the view's queryset, which is already
scoped to the user: an unknown id and someone else's id both answer 200 with an empty list,
identical bodies. A value that is not a whole number answers 400, whatever the id.

``ScopedFilterBackend`` (the API's default filter backend, ``REST_FRAMEWORK`` in settings) builds
``filterset_fields`` on ``ScopedFilterSet`` and refuses a view whose own ``filterset_class`` is not
one, so a new endpoint cannot bring the leak back by accident.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django_filters import rest_framework as filters

from common.checked_input import MAX_ID


class IdField(forms.IntegerField):
    """A whole number a database id can be (0 to ``MAX_ID``): a larger one is a 400, never a 500."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class IdFilter(filters.NumberFilter):
    """A relation filtered by id as a whole number, with no look-up of the related table."""

    field_class = IdField


_BY_ID = {"filter_class": IdFilter}


class ScopedFilterSet(filters.FilterSet):
    """A filter set whose relations are ``IdFilter``s (see the module docstring)."""

    FILTER_DEFAULTS = {
        **filters.FilterSet.FILTER_DEFAULTS,
        models.ForeignKey: _BY_ID,
        models.OneToOneField: _BY_ID,
        models.ManyToManyField: _BY_ID,
        models.OneToOneRel: _BY_ID,
        models.ManyToOneRel: _BY_ID,
        models.ManyToManyRel: _BY_ID,
    }


class ScopedFilterBackend(filters.DjangoFilterBackend):
    """DjangoFilterBackend on ``ScopedFilterSet`` (see the module docstring)."""

    filterset_base = ScopedFilterSet

    def get_filterset_class(self, view: Any, queryset: Any = None) -> Any:
        filterset_class = super().get_filterset_class(view, queryset)
        if filterset_class is not None and not issubclass(filterset_class, ScopedFilterSet):
            raise ImproperlyConfigured(
                f"{type(view).__name__}.filterset_class must subclass annotations.api.filters.ScopedFilterSet"
            )
        return filterset_class
