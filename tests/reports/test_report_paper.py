"""A report that pastes into a paper (issue 36 point 4): the PDF keeps every word inside the page, is
tagged and short (the demo's at most 20 pages); long findings tables show their top rows and go whole into
a supplement of CSV files; the HEDS appendix gives each answer once; the prose speaks to a reader of a
paper (no query strings, flags, settings names or internal keys); the results open with the headline
findings and the limitations name the weak points; the LaTeX labels and captions every table and figure
and compiles without an overfull box."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.models import Study, User
from reports.document import Column, DocTable, Paragraph, ReportDocument, Section
from reports.downloads import report_supplement_response
from reports.formats import renderer
from reports.gather import report_build
from reports.heds import TO_COMPLETE
from reports.models import ReportJob
from reports.sections.findings import BODY_ROWS, excerpt
from reports.sections.prose import headline_sentence
from reports.supplement import README, STAMP, supplement_zip
from reports.wording import labeller_words, reader_text
from tests.helpers import client_for
from tests.reports.api_walk import _same
from tests.s3_server import FileStore, fetch_download

pytestmark = pytest.mark.django_db

PDFLATEX = shutil.which("pdflatex")
POPPLER = shutil.which("pdftotext") is not None and shutil.which("pdfinfo") is not None
MM = 72 / 25.4
# The page's margins (templates/reports/document.html: @page { margin: 18mm 16mm }), in points.
MARGIN_X, MARGIN_Y = 16 * MM, 18 * MM
# What a reader of a paper cannot follow (docs/reports.md, "Written for a paper").
TOOLING = re.compile(r"\?[a-z_]+=|(?<![\w-])--[a-z]|WORKBENCH_|ppi:")


def _pdf_pages_and_tags(path: Path) -> tuple[int, str]:
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True, timeout=60)
    fields = dict(line.split(":", 1) for line in info.stdout.splitlines() if ":" in line)
    return int(fields["Pages"]), fields["Tagged"].strip()


def _words_outside(path: Path) -> list[str]:
    """Every word poppler finds outside its page's text block (the page less its margins, 1 pt leeway)."""
    done = subprocess.run(
        ["pdftotext", "-bbox-layout", str(path), "-"], capture_output=True, check=True, timeout=120
    )
    outside = []
    xhtml = "{http://www.w3.org/1999/xhtml}"
    pages = ElementTree.fromstring(done.stdout).iter(f"{xhtml}page")
    for number, page in enumerate(pages, start=1):
        width, height = float(page.get("width", 0)), float(page.get("height", 0))
        for word in page.iter(f"{xhtml}word"):
            x0, y0, x1, y1 = (float(word.get(k, 0)) for k in ("xMin", "yMin", "xMax", "yMax"))
            if (
                x0 < MARGIN_X - 1
                or x1 > width - MARGIN_X + 1
                or y0 < MARGIN_Y - 1
                or y1 > height - MARGIN_Y + 1
            ):
                outside.append(
                    f"page {number} ({width:.0f}x{height:.0f}): {word.text!r} at {x0:.1f}-{x1:.1f}"
                )
    return outside


@pytest.mark.skipif(not POPPLER, reason="poppler-utils (pdftotext, pdfinfo) is not installed")
def test_the_demo_pdf_is_tagged_at_most_20_pages_and_every_word_lies_inside_the_page(
    demo_study: Study, tmp_path: Path
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(renderer("pdf")(report_build(demo_study)).body)
    pages, tagged = _pdf_pages_and_tags(path)
    assert pages <= 20, pages
    assert tagged == "yes"
    assert _words_outside(path) == []
    # the widest tables are set on landscape pages, inside those pages' margins too
    done = subprocess.run(["pdfinfo", "-f", "1", "-l", str(pages), str(path)], capture_output=True, text=True)
    sizes = re.findall(r"Page\s+\d+ size:\s+([\d.]+) x ([\d.]+)", done.stdout)
    assert any(float(w) > float(h) for w, h in sizes) and any(float(w) < float(h) for w, h in sizes)


def test_a_table_wider_than_the_page_wraps_inside_it(tmp_path: Path) -> None:
    """A long identifier, a long sentence and 12 columns of numbers: the table goes on a landscape page
    and wraps its text; every word lies inside the page and the numbers stay whole."""
    if not POPPLER:
        pytest.skip("poppler-utils (pdftotext, pdfinfo) is not installed")
    long = "a_very_long_identifier_without_any_space_" * 3
    columns = [Column("label", "Label", "label"), Column("why", "Why", "text")] + [
        Column(f"c{i}", f"Estimate number {i}", "estimate") for i in range(12)
    ]
    rows = [[f"{long}{r}", "word " * 40, *[1234.56789 * (i + 1) for i in range(12)]] for r in range(5)]
    narrow = [Column("label", "Label", "label"), Column("text", "Text", "text")]
    document = ReportDocument(
        title="Wide",
        study_ids=[1],
        source="consensus",
        generated_at="2026-01-01T00:00:00+00:00",
        sections=[
            Section(
                key="s",
                title="S",
                blocks=[
                    DocTable(key="wide", title="Wide", columns=columns, rows=rows),
                    DocTable(key="narrow", title="Narrow", columns=narrow, rows=[[long, long + " " + long]]),
                    Paragraph(long * 3),
                ],
            )
        ],
    )
    path = tmp_path / "wide.pdf"
    path.write_bytes(renderer("pdf")(document).body)
    assert _words_outside(path) == []
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True).stdout
    assert "1234.568" in text and "14814.815" in text  # the first and last numbers, whole


def test_the_demo_report_speaks_to_a_reader_of_a_paper(demo_study: Study) -> None:
    document = report_build(demo_study)
    markdown = renderer("md")(document).body.decode()
    html = renderer("html")(document).body.decode()
    for name, text in (("markdown", markdown), ("html", html)):
        assert not TOOLING.findall(text), (name, sorted(set(TOOLING.findall(text))))
    prose = [line for line in markdown.splitlines() if line and not line.startswith("|")]
    assert not [line for line in prose if "p\\_adjusted" in line or "p\\_value" in line]
    assert not [line for line in prose if re.search(r"\.;|\w\.\.(?!\.)|\.\)\.", line)]
    # the labeller by display name and version, in words, wherever a sentence names it
    assert "colour-rule c8b2d0e disagrees with the human consensus on product\\_color" in markdown
    assert not [line for line in prose if "colour-rule@" in line]
    # the commands that recompute the report are in the supplement's README, not the body
    assert "manage.py" not in markdown


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Labels from consensus, the default. Switch with ?source=NAME (page and API) or --source NAME "
            "(manage.py metrics); sources with labels now: consensus, colour-rule@c8b2d0e364c, "
            "ppi:colour-rule@c8b2d0e364c.",
            "Labels from consensus, the default. Sources with labels now: consensus, colour-rule c8b2d0e, "
            "colour-rule c8b2d0e + human sample.",
        ),
        (
            "p_adjusted: Holm over the 16 tests; significant_adjusted: p_adjusted < 0.05. p_value and "
            "significant are uncorrected. Choose the correction with ?correction=holm|bh (page and API) "
            "or --correction (manage.py metrics).",
            "Corrected p: Holm over the 16 tests; significant after correction: corrected p < 0.05. Raw p "
            "and significant are uncorrected.",
        ),
        (
            "no item has its 3 judgements yet; 4 partial items wait (include them, provisional, with "
            "?partial=1)",
            "no item has its 3 judgements yet; 4 partial items wait",
        ),
        (
            "Read it as tentative at best (docs/metrics.md, Reliability gate).",
            "Read it as tentative at best.",
        ),
        ("at least 10 items (default WORKBENCH_PPI_MIN_PEOPLE, 10) each", "at least 10 items each"),
        ("estimates of means (source ppi:LABELLER)", "estimates of means"),
    ],
)
def test_finding_side_strings_are_rewritten_for_a_reader(text: str, expected: str) -> None:
    assert reader_text(text) == expected
    assert labeller_words("colour-rule@c8b2d0e364c") == "colour-rule c8b2d0e"
    assert labeller_words("vlm@1.2") == "vlm v1.2"


def _api_tables(study: Study) -> dict[str, dict[str, Any]]:
    answer = client_for(study.owner).get(f"/api/studies/{study.pk}/metrics/")
    assert answer.status_code == 200
    return {table["key"]: table for table in answer.json()["tables"]}


def test_long_findings_tables_show_their_top_rows_and_the_supplement_holds_every_row(
    demo_study: Study, tmp_path: Path
) -> None:
    out = tmp_path / "paper" / "report.md"
    call_command("report", str(demo_study.pk), "--format", "md", "--out", str(out), stdout=io.StringIO())
    api = _api_tables(demo_study)
    text = out.read_text()
    zip_path = out.parent / "report-supplement.zip"
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        assert names == [README, *(f"{key}.csv" for key in api)]
        assert all(entry.date_time == STAMP for entry in archive.infolist())
        readme = archive.read(README).decode()
        for key, table in api.items():
            with archive.open(f"{key}.csv") as handle:
                rows = list(csv.reader(io.TextIOWrapper(handle, encoding="utf-8")))
            assert rows[0] == table["columns"] and len(rows) == len(table["rows"]) + 1, key
            assert f"{key}.csv: {table['title']} ({len(table['rows']):,} rows" in readme
        assert "python manage.py metrics" in readme
    # the listings (SODA's concentrated cases and shifts) show their top rows with a sentence
    shifts = api["soda_shifts"]
    assert len(shifts["rows"]) > 40
    assert (
        f"This table has {len(shifts['rows']):,} rows; shown here are the top {BODY_ROWS} rows by changed, "
        "then by group share. Every row is in soda\\_shifts.csv in the report's supplement." in text
    )
    body = text.split("**Base -&gt; group shift of the dominant value**")[1].split("\n\n_")[0]
    table_lines = [line for line in body.splitlines() if line.startswith("| demo")]
    assert len(table_lines) == BODY_ROWS and all(line.endswith("| yes |") for line in table_lines)
    # a short table stays whole in the body
    document = report_build(demo_study)
    bds = next(t for t in document.tables() if t.key == "soda_bds")
    assert bds.full_rows is None and len(bds.rows) == len(api["soda_bds"]["rows"])
    # the same document gives the same bytes
    assert supplement_zip(document) == supplement_zip(document)


def test_a_supplement_cell_that_a_spreadsheet_would_run_is_text() -> None:
    table = DocTable(
        key="t",
        title="T",
        columns=[Column("label", "label", "label"), Column("x", "x", "estimate")],
        rows=[["=HYPERLINK(1)", 0.5], ["-2", None]],
        csv="t.csv",
    )
    document = ReportDocument(
        title="T", study_ids=[1], source="c", generated_at="g", sections=[Section("s", "S", [table])]
    )
    with zipfile.ZipFile(io.BytesIO(supplement_zip(document))) as archive:
        assert archive.read("t.csv").decode() == "label,x\n'=HYPERLINK(1),0.5\n'-2,\n"


def test_a_long_table_is_cut_to_its_largest_effects() -> None:
    columns = [
        Column("group", "group", "label"),
        Column("effect", "effect", "estimate"),
        Column("p", "p", "p"),
    ]
    rows = [[f"g{i}", (i % 7) / 10 - 0.3, 0.5] for i in range(50)]
    table = excerpt(DocTable(key="k", title="K", columns=columns, rows=rows, csv="k.csv"))
    assert table.full_rows == rows and len(table.rows) == BODY_ROWS
    shown = [abs(row[1]) for row in table.rows]
    assert shown == sorted(shown, reverse=True) and shown[0] == pytest.approx(0.3)
    assert table.notes[0] == (
        f"This table has 50 rows; shown here are the {BODY_ROWS} rows with the largest effect. Every row "
        "is in k.csv in the report's supplement."
    )


def test_the_report_job_stores_the_supplement_beside_the_report(
    demo_study: Study, default_store: FileStore, django_capture_on_commit_callbacks: Any
) -> None:
    client = client_for(demo_study.owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/api/studies/{demo_study.pk}/report/", {"format": "md"}, format="json")
    job = ReportJob.objects.get(pk=answer.json()["id"])
    assert job.status == ReportJob.Status.DONE, job.error
    assert job.supplement.name.endswith(f"report-{job.pk}-supplement.zip")
    response = report_supplement_response(job)
    if default_store.kind != "s3":
        assert response["Content-Disposition"] == (
            f'attachment; filename="study-{demo_study.pk}-report-supplement.zip"'
        )
    data = fetch_download(response, default_store)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert README in archive.namelist() and "soda_shifts.csv" in archive.namelist()
    # Its doors: the API names it and answers it, the Report tab links it; a stranger gets nothing.
    job_json = client.get(f"/api/studies/{demo_study.pk}/report/{job.pk}/").json()
    assert job_json["supplement_url"] == f"/api/studies/{demo_study.pk}/report/{job.pk}/supplement/"
    api_zip = client.get(job_json["supplement_url"])
    assert api_zip.status_code in (200, 302)
    page = Client()
    page.force_login(demo_study.owner)
    tab = page.get(f"/studies/{demo_study.pk}/report/").content.decode()
    assert f'href="/studies/{demo_study.pk}/report/{job.pk}/supplement/"' in tab
    assert page.get(f"/studies/{demo_study.pk}/report/{job.pk}/supplement/").status_code in (200, 302)
    stranger = Client()
    stranger.force_login(User.objects.create_user(username="stranger", password="x" * 12, role="researcher"))
    assert stranger.get(f"/studies/{demo_study.pk}/report/{job.pk}/supplement/").status_code == 404


def test_the_heds_appendix_gives_each_answer_once(demo_study: Study) -> None:
    document = report_build(demo_study)
    section4 = next(s for s in document.heds["sections"] if s["section"] == "4")
    left_out = [entry["criterion"] for entry in section4["criteria_left_out"]]
    # the demo has cars and cups: the laptop, backpack and teddy bear questions are no criterion here
    assert len(left_out) == 12 and all(
        key.startswith(("laptop_", "backpack_", "teddy_bear_")) for key in left_out
    )
    kept = [c["criterion"] for c in section4["criteria"]]
    assert not set(kept) & set(left_out) and len(kept) == 12
    assert not any(
        key.startswith(("laptop_", "backpack_")) for key in document.heds["to_complete_by_the_authors"]
    )
    markdown = renderer("md")(document).body.decode()
    heds = markdown.split("## HEDS 3.0 datasheet")[1]
    instructions = section4["instructions"]
    assert instructions and heds.count(instructions[:60].replace("_", "\\_")) == 1
    assert "12 questions of the protocol are left out as criteria" in heds
    assert "laptop\\_keyboard\\_layout" in heds  # named once, in that sentence
    assert heds.count("laptop\\_keyboard\\_layout") == 1
    # each answer once with the criteria it covers: the shared ones say "every criterion"
    assert (
        "| 4.2.2 whether outputs are assessed in absolute or relative terms | every criterion | absolute"
        in heds
    )
    # what is left to the authors: one list, each question once
    assert heds.count(TO_COMPLETE) == 1
    todo = heds.split(f"### HEDS questions {TO_COMPLETE}")[1]
    assert "* 4.1.1 type of quality assessed (correctness, goodness, feature) (every criterion)" in todo
    assert todo.count("* 1.1.1 ") == 1


def test_the_results_open_with_the_headline_findings_and_limitations_name_the_weak_points(
    demo_study: Study,
) -> None:
    document = report_build(demo_study)
    summary = next(s for s in document.sections if s.key == "summary")
    results = next(s for s in summary.subsections if s.key == "results")
    first = results.blocks[0]
    assert isinstance(first, Paragraph) and first.text.startswith(
        "Headline findings. Baseline divergence BDS"
    )
    bds = _api_tables(demo_study)["soda_bds"]
    at = {name: i for i, name in enumerate(bds["columns"])}
    top = max(bds["rows"], key=lambda row: row[at["bds"]])
    p = "< 0.001" if top[at["p_adjusted"]] < 0.001 else f"{top[at['p_adjusted']]:.3g}"
    assert (
        f"the largest bds are {top[at['bds']]:.3f} for {top[at['object']]}, {top[at['condition']]} "
        in first.text
    )
    assert f"(corrected p {p}; raw p " in first.text
    limitations = next(s for s in summary.subsections if s.key == "limitations").blocks[0]
    items = limitations.items  # type: ignore[union-attr]
    unreliable = [e["question"] for e in document_reliability(demo_study) if e["verdict"] == "unreliable"]
    line = next(item for item in items if item.startswith("Unreliable questions"))
    assert all(question in line for question in unreliable)
    assert any(
        item.startswith(f"Small groups: {len(bds['rows'])} of {len(bds['rows'])} rows of Baseline divergence")
        for item in items
    )
    assert any(item.startswith("Partial items: the findings count 54 of 72 items") for item in items)


def document_reliability(study: Study) -> list[dict[str, Any]]:
    answer = client_for(study.owner).get(f"/api/studies/{study.pk}/metrics/")
    reliability: list[dict[str, Any]] = answer.json()["reliability"]
    return reliability


def test_a_headline_gives_the_corrected_p_and_the_interval() -> None:
    table = DocTable(
        key="ppi_differences",
        title="Differences",
        columns=[
            Column("group", "group", "label"),
            Column("difference", "difference", "estimate"),
            Column("low", "low", "low"),
            Column("high", "high", "high"),
            Column("p_value", "p value", "p"),
            Column("p_adjusted", "p adjusted", "p_adjusted"),
        ],
        rows=[
            ["a", 0.1, 0.0, 0.2, 0.04, 0.08],
            ["b", -0.5, -0.7, -0.3, 0.0001, 0.0003],
            ["c", None, None, None, None, None],
        ],
    )
    assert headline_sentence(table) == (
        "Differences: the largest difference are -0.500 for b (corrected p < 0.001; raw p < 0.001; 95% "
        "interval [-0.700, -0.300]), then 0.100 for a (corrected p 0.08; raw p 0.04; 95% interval "
        "[0.000, 0.200]); 1 of 2 tests are below 0.05 after correction."
    )


@pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed")
def test_the_demo_latex_labels_and_captions_every_table_and_figure_and_has_no_overfull_box(
    demo_study: Study, tmp_path: Path
) -> None:
    rendered = renderer("tex")(report_build(demo_study))
    source = rendered.body.decode()
    tables = source.count(r"\begin{table}") + source.count(r"\begin{longtable}")
    figures = source.count(r"\begin{figure}")
    assert tables and figures
    labels = re.findall(r"\\label\{((?:tab|fig):[A-Za-z0-9_:-]+)\}", source)
    assert len([x for x in labels if x.startswith("tab:")]) == tables
    assert len([x for x in labels if x.startswith("fig:")]) == figures
    assert len(set(labels)) == len(labels)
    assert r"\label{tab:soda_bds}" in source and r"\label{fig:soda_bds}" in source
    # a caption defines the table's symbols: its estimator and what one n counts
    caption = re.search(r"\\caption\[[^\]]*\]\{(Baseline divergence BDS.*?)\}\\label\{tab:soda_bds\}", source)
    assert (
        caption
        and "BDS = mean over the attributes" in caption.group(1)
        and "n counts images" in caption.group(1)
    )
    # a long table is set in p{} columns that share the line, so that nothing runs off the page
    assert re.search(r"\\begin\{longtable\}\{>\{\\raggedright\\arraybackslash\}p\{\\dimexpr", source)
    (tmp_path / "report.tex").write_bytes(rendered.body)
    for name, data in rendered.attachments.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    done = subprocess.run(
        [str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "report.tex"],
        cwd=tmp_path,
        capture_output=True,
        timeout=600,
    )
    log = (tmp_path / "report.log").read_text(encoding="latin-1")
    assert done.returncode == 0, log[-3000:]
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log, re.findall(r"Overfull.*", log)


def test_every_body_row_of_a_cut_table_is_one_of_its_rows(demo_study: Study) -> None:
    document = report_build(demo_study)
    cut = [t for t in document.tables() if t.full_rows is not None]
    assert {t.key for t in cut} == {"soda_concentrated", "soda_shifts"}
    for table in cut:
        assert all(any(_same(row, full) for full in table.full_rows or []) for row in table.rows)


def test_a_compare_reports_supplement_names_each_studys_tables(visage_import: Any) -> None:
    first = visage_import()["stereotype-markers"]
    second = visage_import()["stereotype-markers"]
    document = report_build(first, compare=[second])
    with zipfile.ZipFile(io.BytesIO(supplement_zip(document))) as archive:
        names = archive.namelist()
        readme = archive.read(README).decode()
    for study in (first, second):
        mine = [name for name in names if name.startswith(f"study-{study.pk}-")]
        assert f"study-{study.pk}-visage_tendency.csv" in mine
        assert f"python manage.py metrics {study.pk} " in readme
    assert names[0] == README and len(set(names)) == len(names)
