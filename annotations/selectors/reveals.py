"""Reads about reveal after submit (machine labels shown to a person once they have answered)."""

from __future__ import annotations

from annotations.models import Assignment


def reveal_enabled(assignment: Assignment) -> bool:
    """Whether the study shows machine labels to a person once they have answered (reveal after submit)."""
    return assignment.study.reveal_after_submit
