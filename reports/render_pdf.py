"""The report as a PDF: the HTML page of ``reports.render_html`` laid out by WeasyPrint (made on a
worker: the report job, ``reports.jobs``).

WeasyPrint loads nothing from outside: its ``url_fetcher`` refuses every URL (``file:``, ``http:`` and
every other scheme) but a ``data:`` URL of a PNG or JPEG image, which is how matplotlib embeds a heat
map's raster inside its SVG (a ``data:`` URL reads neither the network nor a file; untrusted text is
escaped, so it cannot name one, and figures' SVG passed ``reports/svg_check.py``). The page needs nothing
else: its style sheet and figures (SVG) are inline. WeasyPrint's own log (every CSS property of an SVG
it skips) is kept to errors.
WeasyPrint needs Pango (Debian: libpango-1.0-0, libpangoft2-1.0-0; docs/deploy.md).
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from reports.document import ReportDocument
from reports.formats import Rendered
from reports.render_html import render_page, report_filename


class FetchRefused(ValueError):
    """What the url fetcher answers every URL with."""


# A tagged PDF (its structure tree: headings, paragraphs, lists, tables with their header cells), which
# screen readers and PDF/UA checkers read: WeasyPrint's PDF/UA-1 variant (the page's lang and title are
# its language and title).
PDF_OPTIONS: dict[str, Any] = {"pdf_variant": "pdf/ua-1", "pdf_tags": True}

# The only URLs a figure's SVG may carry: matplotlib's embedded rasters.
EMBEDDED_IMAGES = ("data:image/png;base64,", "data:image/jpeg;base64,")


def refuse_every_url(url: str, *args: Any, **kwargs: Any) -> NoReturn:
    """Refuses ``url``: nothing is fetched (the report is self-contained)."""
    raise FetchRefused(f"the report loads nothing from outside ({url[:80]!r} refused)")


def embedded_images_only() -> Any:
    """WeasyPrint's ``url_fetcher``: a figure's embedded PNG or JPEG (``data:`` only, read by urllib's
    data handler), nothing else (FetchRefused)."""
    import weasyprint

    class EmbeddedImagesOnly(weasyprint.URLFetcher):  # type: ignore[misc]
        def fetch(self, url: str, headers: Any = None) -> Any:
            if not url.startswith(EMBEDDED_IMAGES):
                refuse_every_url(url)
            return super().fetch(url, headers)

    return EmbeddedImagesOnly(allowed_protocols={"data"}, allow_redirects=False)


def render(document: ReportDocument) -> Rendered:
    for name in ("weasyprint", "weasyprint.progress"):  # before the import, which parses style sheets
        logging.getLogger(name).setLevel(logging.ERROR)
    import weasyprint  # heavy (Pango, fonts): loaded only where a PDF is made

    html = weasyprint.HTML(string=render_page(document), url_fetcher=embedded_images_only(), base_url=None)
    body: bytes = html.write_pdf(**PDF_OPTIONS)
    return Rendered(filename=report_filename(document, "pdf"), content_type="application/pdf", body=body)
