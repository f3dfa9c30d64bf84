"""Hand-built report documents for the renderer and door tests (a helper module, not a test module)."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

from findings.tables import Method
from reports.document import (
    BulletList,
    Column,
    DocFigure,
    DocTable,
    Facts,
    Paragraph,
    ReportDocument,
    Section,
)

# Text that breaks every format it is not escaped for: HTML, LaTeX, Markdown tables.
HOSTILE = r"</script><script>alert(1)</script> & % $ # _ { } ~ ^ \ | *"
UNICODE = "Ölçü naïve 東京"


def figure(key: str, title: str) -> DocFigure:
    """A real matplotlib drawing (a bar chart titled ``title``), in SVG and PDF."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    drawing = Figure(figsize=(4, 2.5))
    axes = drawing.subplots()
    axes.bar(["a", "b"], [3, 5])
    axes.set_title(title.encode("ascii", "replace").decode())  # DejaVu has no CJK glyphs: no warning
    svg, pdf = io.StringIO(), io.BytesIO()
    drawing.savefig(svg, format="svg")
    drawing.savefig(pdf, format="pdf")
    return DocFigure(key=key, title=title, table="t", svg=svg.getvalue(), pdf=pdf.getvalue())


def hostile_document(*, rows: int = 1) -> ReportDocument:
    """Hostile and non-Latin text in every place a string goes, and numbers a test looks for:
    1,234 items, estimate 0.123 [0.100, 0.200], p < 0.001 and 0.0312 -> 0.0312."""
    text = f"{HOSTILE} {UNICODE}"
    table = DocTable(
        key="table-1",
        title=f"Tab {text}",
        columns=[
            Column("group", f"Col {text}", "label"),
            Column("n", "n", "n"),
            Column("estimate", "Estimate", "estimate"),
            Column("interval", "95% CI", "interval"),
            Column("p", "p", "p"),
        ],
        rows=[[f"row {text}", 1234, 0.12345, (0.1, 0.2), 0.0004], ["plain", 7, None, (None, None), 0.0312]]
        + [[f"r{i}", i, i / 7, (0.0, 1.0), 0.5] for i in range(rows - 1)],
        n=1234,
        notes=[f"Note {text}"],
        method=Method(
            estimator=f"share {text}", interval="percentile bootstrap", test="binomial", correction="Holm"
        ),
    )
    return ReportDocument(
        title=f"Audit {text}",
        study_ids=[7],
        source=f"consensus {HOSTILE}",
        generated_at="2026-11-27T03:00:00+00:00",
        sections=[
            Section(
                key="design",
                title=f"Design {text}",
                blocks=[
                    Paragraph(f"Paragraph {text}"),
                    Facts(pairs=[(f"Label {text}", f"Value {text}")]),
                    BulletList(items=[f"Bullet {text}"]),
                    table,
                    figure("fig/1 <x>", f"Figure {text}"),
                ],
                subsections=[
                    Section(
                        key="empty",
                        title="Empty",
                        blocks=[
                            DocTable(
                                key="none",
                                title="Nothing",
                                columns=[Column("a", "A")],
                                rows=[],
                                empty_reason=f"no labels yet {HOSTILE}",
                            )
                        ],
                    )
                ],
            )
        ],
    )


def pdf_text(pdf: bytes, folder: Path) -> str:
    """The text of a PDF, read by poppler's pdftotext."""
    path = folder / "read.pdf"
    path.write_bytes(pdf)
    done = subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode("utf-8", "replace")


def poppler_missing() -> bool:
    return shutil.which("pdftotext") is None or shutil.which("pdftoppm") is None
