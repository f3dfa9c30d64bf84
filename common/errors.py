"""Domain errors raised by services; the API's exception handler maps them to 4xx responses."""

from __future__ import annotations


class WorkbenchError(Exception):
    """Base of the errors a user can act on; ``message`` is safe to show."""

    status_code = 400

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ValidationFailed(WorkbenchError):
    """Bad input: a file, a row, a field. ``details`` may map fields to messages."""

    def __init__(self, message: str, details: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class ImportRefused(ValidationFailed):
    """An import stopped at a bad row or file; nothing was written."""


class NotAllowed(WorkbenchError):
    status_code = 403


class NotFoundError(WorkbenchError):
    status_code = 404


class Conflict(WorkbenchError):
    status_code = 409


class QuotaReached(Conflict):
    """A participant submitted as many items as their invitation's quota allows."""
