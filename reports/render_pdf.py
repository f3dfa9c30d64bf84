"""The report as a PDF: the HTML page of ``reports.render_html`` laid out by WeasyPrint (made on a
worker: the report job, ``reports.jobs``).

WeasyPrint loads nothing: its ``url_fetcher`` refuses every URL (``file:``, ``http:``, ``data:``
alike), so a link or an image named in untrusted text can neither reach the network nor read a file
of the server. The page needs nothing from outside: its style sheet and figures (SVG) are inline.
WeasyPrint needs Pango (Debian: libpango-1.0-0, libpangoft2-1.0-0; docs/deploy.md).
"""

from __future__ import annotations

from typing import Any, NoReturn

from reports.document import ReportDocument
from reports.formats import Rendered
from reports.render_html import render_page, report_filename


class FetchRefused(ValueError):
    """What the url fetcher answers every URL with."""


def refuse_every_url(url: str, *args: Any, **kwargs: Any) -> NoReturn:
    """WeasyPrint's ``url_fetcher``: nothing is fetched (the report is self-contained)."""
    raise FetchRefused(f"the report loads nothing from outside ({url[:80]!r} refused)")


def render(document: ReportDocument) -> Rendered:
    import weasyprint  # heavy (Pango, fonts): loaded only where a PDF is made

    html = weasyprint.HTML(string=render_page(document), url_fetcher=refuse_every_url, base_url=None)
    body: bytes = html.write_pdf()
    return Rendered(filename=report_filename(document, "pdf"), content_type="application/pdf", body=body)
