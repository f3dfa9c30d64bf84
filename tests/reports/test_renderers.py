"""The renderers on hand-built documents: hostile text escaped in HTML and LaTeX, SVG checked before
it is inlined, the LaTeX compiled by pdflatex and the PDF read back by poppler."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from reports import render_html, render_latex, render_pdf
from reports.document import DocFigure
from reports.formats import renderer
from reports.render_latex import latex_escape
from reports.svg_check import UnsafeSvg, svg_checked
from tests.reports.documents import HOSTILE, hostile_document, pdf_text, poppler_missing

PDFLATEX = shutil.which("pdflatex")

# --- HTML ------------------------------------------------------------------------------------------


def test_html_escapes_every_string_and_runs_nothing() -> None:
    page = render_html.render(hostile_document()).body.decode("utf-8")
    assert "<script" not in page.lower()
    assert "alert(1)</script>" not in page
    escaped = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; % $ # _ { } ~ ^ \\ | *"
    for where in ("Audit ", "Design ", "Paragraph ", "Label ", "Value ", "Bullet ", "Tab ", "Col ", "row "):
        assert f"{where}{escaped}" in page, where
    assert f"Note {escaped}" in page and f"no labels yet {escaped}" in page
    assert "Ölçü naïve 東京" in page


def test_html_is_one_page_with_contents_captions_headers_and_numbers_right_aligned() -> None:
    page = render_html.render(hostile_document()).body.decode("utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert 'href="#s1"' in page and 'href="#s1-1"' in page and 'id="s1-1"' in page
    assert "<caption>Tab " in page and "(n = 1,234)</caption>" in page
    assert '<th scope="col" class="num">Estimate</th>' in page
    assert '<th scope="row">row ' in page
    assert '<td class="num">0.123</td>' in page and '<td class="num">[0.100, 0.200]</td>' in page
    assert '<td class="num">&lt; 0.001</td>' in page and '<td class="num">-</td>' in page
    assert "Estimator: share" in page and "interval: percentile bootstrap" in page
    # External references: none (the PDF is made from this page with every fetch refused).
    assert "src=" not in page and "<link" not in page


def test_html_inlines_the_checked_figure() -> None:
    page = render_html.render(hostile_document()).body.decode("utf-8")
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page
    assert "<figcaption>Figure &lt;/script&gt;" in page
    assert "<!DOCTYPE svg" not in page and "<?xml" not in page


@pytest.mark.parametrize(
    "svg",
    [
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><SCRIPT>alert(1)</SCRIPT></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><g/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><g ONCLICK="alert(1)"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><p>x</p></foreignObject></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:x="http://www.w3.org/1999/xlink">'
        '<use x:href="https://evil.example/a.svg#x"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><a href="javascript:alert(1)"><text>x</text></a></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><set attributeName="href" to="javascript:alert(1)"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><style>@import url(https://evil.example/x.css);</style></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><rect style="fill: url(https://evil.example/)"/></svg>',
        '<!DOCTYPE svg [<!ENTITY x "y">]><svg xmlns="http://www.w3.org/2000/svg">&x;</svg>',
        "<html><body/></html>",
        "not xml at all <svg",
        # XML forbids -- in a comment; HTML would end the comment at --!> and run the script.
        '<svg xmlns="http://www.w3.org/2000/svg"><!-- --!><script>alert(1)</script> --></svg>',
    ],
)
def test_svg_with_anything_active_is_refused(svg: str) -> None:
    with pytest.raises(UnsafeSvg):
        svg_checked(svg)


def test_a_refused_figure_is_left_out_with_a_note() -> None:
    document = hostile_document()
    figure = document.sections[0].blocks[-1]
    figure.svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><g/></svg>'  # type: ignore[union-attr]
    page = render_html.render(document).body.decode("utf-8")
    assert "onload=" not in page and "Figure left out: the figure holds an event attribute onload." in page


def test_svg_check_keeps_what_it_checked_and_drops_comments() -> None:
    svg = (
        '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        "<!-- a note -->"
        '<defs><path id="p" d="M0 0"/></defs><use xlink:href="#p"/><text>&lt;b&gt; &amp;</text></svg>'
    )
    out = svg_checked(svg)
    assert "<!--" not in out and "script" not in out and "<?xml" not in out
    assert 'xlink:href="#p"' in out and "&lt;b&gt; &amp;" in out


# --- LaTeX -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "latex"),
    [
        ("a & b", r"a \& b"),
        ("100% $5 #1 x_y", r"100\% \$5 \#1 x\_\allowbreak{}y"),
        ("{x}", r"\{x\}"),
        ("\\input{/etc/passwd}", r"\textbackslash{}input\{/etc/passwd\}"),
        ("~^", r"\textasciitilde{}\textasciicircum{}"),
        ("a<b>c|d", r"a\textless{}b\textgreater{}c\textbar{}d"),
        ("--", "-{}-{}"),
        ("line\nbreak\ttab", "line break tab"),
        ("bell\x07null\x00esc\x1b", "bellnullesc"),
        ("Ölçü naïve", "Ölçü naïve"),
        ("e\u0301", "é"),
        ("東京", "[U+6771][U+4EAC]"),
        ("😀", "[U+1F600]"),
        ("zero\u200bwidth", "zerowidth"),
    ],
)
def test_latex_escape(text: str, latex: str) -> None:
    assert latex_escape(text) == latex


def test_latex_is_a_standalone_article_with_booktabs_and_figures() -> None:
    rendered = render_latex.render(hostile_document(rows=40))
    source = rendered.body.decode("utf-8")
    assert rendered.filename == "report.tex"
    assert source.startswith(r"\documentclass") and source.rstrip().endswith(r"\end{document}")
    for package in ("[utf8]{inputenc}", "[T1]{fontenc}", "{booktabs}", "{longtable}", "{graphicx}"):
        assert package in source
    assert r"\toprule" in source and r"\midrule" in source and r"\bottomrule" in source
    assert r"\begin{longtable}" in source  # 41 rows: breaks across pages
    assert list(rendered.attachments) == ["figures/fig-1-x.pdf"]
    assert (
        r"\includegraphics[width=\linewidth,height=0.45\textheight,keepaspectratio]{figures/fig-1-x.pdf}"
        in source
    )
    assert rendered.attachments["figures/fig-1-x.pdf"].startswith(b"%PDF")
    assert "<script>" not in source and r"\textless{}/script\textgreater{}" in source


def test_a_short_table_is_a_booktabs_tabular() -> None:
    source = render_latex.render(hostile_document()).body.decode("utf-8")
    # The long hostile label column wraps in a paragraph column; the numbers are right-aligned.
    assert r"\begin{tabular}{>{\raggedright\arraybackslash}p{0.60\linewidth}rrrr}" in source
    assert r"\begin{longtable}" not in source


@pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex is not installed (Debian: texlive-latex-base, texlive-latex-recommended)",
)
@pytest.mark.skipif(poppler_missing(), reason="poppler-utils (pdftotext) is not installed")
def test_latex_compiles_with_pdflatex_and_prints_the_text_and_numbers(tmp_path: Path) -> None:
    rendered = render_latex.render(hostile_document(rows=40))
    (tmp_path / rendered.filename).write_bytes(rendered.body)
    for name, data in rendered.attachments.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    done = subprocess.run(
        [str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", rendered.filename],
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout.decode("utf-8", "replace")[-3000:]
    text = pdf_text((tmp_path / "report.pdf").read_bytes(), tmp_path)
    flat = " ".join(text.split())
    assert f"Audit {HOSTILE} Ölçü naïve [U+6771][U+4EAC]" in flat
    for number in ("1,234", "0.123", "[0.100, 0.200]", "< 0.001", "0.0312"):
        assert number in flat, number
    assert "Note </script><script>alert(1)</script>" in flat


# --- PDF -------------------------------------------------------------------------------------------


def test_the_pdf_fetches_nothing_but_a_figures_embedded_raster() -> None:
    fetch = render_pdf.embedded_images_only().fetch
    for url in (
        "file:///etc/passwd",
        "http://169.254.169.254/",
        "data:text/html;base64,PHNjcmlwdD4=",
        "data:image/svg+xml;base64,PHN2Zz4=",
        "/etc/passwd",
    ):
        with pytest.raises(render_pdf.FetchRefused):
            fetch(url)
    png = io.BytesIO()
    Image.new("RGB", (2, 2), "red").save(png, format="PNG")
    answer = fetch("data:image/png;base64," + base64.b64encode(png.getvalue()).decode())
    assert answer.headers["Content-Type"] == "image/png" and answer.read() == png.getvalue()


@pytest.mark.skipif(poppler_missing(), reason="poppler-utils (pdftotext, pdftoppm) is not installed")
def test_a_heat_map_figure_keeps_its_raster_in_the_pdf(tmp_path: Path) -> None:
    """matplotlib embeds a heat map's pixels in its SVG as a data: PNG; the PDF shows it."""
    from matplotlib.figure import Figure

    drawing = Figure(figsize=(3, 2))
    drawing.subplots().imshow([[0.0, 1.0], [1.0, 0.0]])
    svg, pdf = io.StringIO(), io.BytesIO()
    drawing.savefig(svg, format="svg")
    drawing.savefig(pdf, format="pdf")
    assert "data:image/png;base64," in svg.getvalue()
    document = hostile_document()
    document.sections[0].blocks.append(
        DocFigure(key="heat", title="Heat", table="t", svg=svg.getvalue(), pdf=pdf.getvalue())
    )
    (tmp_path / "r.pdf").write_bytes(renderer("pdf")(document).body)
    listed = subprocess.run(
        ["pdfimages", "-list", str(tmp_path / "r.pdf")], capture_output=True, text=True, check=True
    ).stdout
    assert len(listed.strip().splitlines()) >= 3, listed  # two header lines, then one line per image


@pytest.mark.skipif(poppler_missing(), reason="poppler-utils (pdftotext, pdftoppm) is not installed")
def test_pdf_holds_the_numbers_and_page_one_is_not_blank(tmp_path: Path) -> None:
    from PIL import Image

    rendered = renderer("pdf")(hostile_document())
    assert rendered.content_type == "application/pdf" and rendered.body.startswith(b"%PDF")
    assert rendered.filename == "report-study-7.pdf"
    flat = " ".join(pdf_text(rendered.body, tmp_path).split())
    assert "Audit </script><script>alert(1)</script> & % $ # _ { } ~ ^ \\ | *" in flat
    for number in ("1,234", "0.123", "[0.100, 0.200]", "< 0.001", "0.0312"):
        assert number in flat, number
    (tmp_path / "r.pdf").write_bytes(rendered.body)
    subprocess.run(
        [
            "pdftoppm",
            "-png",
            "-r",
            "50",
            "-f",
            "1",
            "-l",
            "1",
            str(tmp_path / "r.pdf"),
            str(tmp_path / "page"),
        ],
        check=True,
        timeout=120,
    )
    [page] = list(tmp_path.glob("page*.png"))
    with Image.open(page) as image:
        extrema = image.convert("L").getextrema()  # one band: (darkest, lightest)
    low, high = int(extrema[0]), int(extrema[1])  # type: ignore[arg-type]
    assert low < 128 < high  # ink on paper, not a blank page
