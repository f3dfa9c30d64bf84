"""The report's formats: each a renderer ``render(document) -> Rendered`` named by dotted path, imported
when used (WeasyPrint and matplotlib load only for the formats that need them).

| format | renderer | what it gives |
| --- | --- | --- |
| md | ``reports.render_markdown`` | GitHub-flavoured Markdown; figures as SVG files beside it |
| html | ``reports.render_html`` | one self-contained HTML page, figures inline as SVG |
| tex | ``reports.render_latex`` | LaTeX (booktabs), figures as PDF files beside it |
| pdf | ``reports.render_pdf`` | a PDF (made on a worker) |
| heds | ``reports.heds`` | the HEDS 3.0 datasheet as JSON |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from common.errors import ValidationFailed

if TYPE_CHECKING:
    from reports.document import ReportDocument


@dataclass
class Rendered:
    """A rendered report: the main file (``filename``, ``content_type``, ``body``) and the files it refers
    to by relative name (figures), which a download bundles with it in a zip. ``supplement``: the zip of
    every findings table as CSV that goes with the report (``reports.supplement``), where the caller
    asked for it (``reports.jobs.report_render``); a file of its own beside the report."""

    filename: str
    content_type: str
    body: bytes
    attachments: dict[str, bytes] = field(default_factory=dict)
    supplement: bytes | None = None


FORMATS: dict[str, str] = {
    "md": "reports.render_markdown",
    "html": "reports.render_html",
    "tex": "reports.render_latex",
    "pdf": "reports.render_pdf",
    "heds": "reports.heds",
}


def renderer(fmt: str) -> Callable[[ReportDocument], Rendered]:
    """The ``render`` function of format ``fmt`` (ValidationFailed naming the formats otherwise)."""
    if fmt not in FORMATS:
        raise ValidationFailed(f"unknown report format {fmt!r}: choose one of {', '.join(FORMATS)}")
    render: Callable[[ReportDocument], Rendered] = importlib.import_module(FORMATS[fmt]).render
    return render
