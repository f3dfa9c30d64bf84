"""The study's stereotype table (SeeGULL-style rows a visage study imports), as its readers need it."""

from __future__ import annotations

from annotations.models import StereotypeEntry, Study


def stereotype_table_rows(study: Study) -> list[tuple[str, str, int | None, bool | None]]:
    """The study's stereotype table as (identity, attribute, na_stereo, visual), in table order: what
    the visage pull prompt set is made of (``generation.prompts.visage.stereotypes_from_table``)."""
    return list(
        StereotypeEntry.objects.filter(study=study)
        .order_by("identity", "attribute")
        .values_list("identity", "attribute", "na_stereo", "visual")
    )


def stereotype_table_size(study: Study) -> int:
    """How many rows the study's stereotype table holds (0: none imported)."""
    return StereotypeEntry.objects.filter(study=study).count()
