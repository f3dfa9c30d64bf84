"""The one renderer of instructions and help (``common/safe_markdown.py``): structure kept, untrusted
markup inert. The task page and its preview use it through the ``markdown`` filter (browser test:
``tests/browser/test_annotator_screen_browser.py``); here every escape is checked on the function and
through a real page's HTTP answer."""

from __future__ import annotations

import pytest

from common.safe_markdown import first_paragraph_text, link_is_safe, markdown_html
from protocols.schema import load_preset


def test_paragraphs_join_hard_wrapped_lines_and_lists_stay_lists() -> None:
    html = markdown_html(
        "Look at the image\nclosely, then *answer*.\n\n\nSecond  part:\n- one\n  more\n- two\n"
    )
    assert html == (
        "<p>Look at the image\nclosely, then <em>answer</em>.</p>\n<p>Second  part:</p>\n"
        "<ul>\n<li>one\nmore</li>\n<li>two</li>\n</ul>"
    )
    assert markdown_html("") == "" and markdown_html(None) == "" and markdown_html("  \n ") == ""


def test_the_visualness_scale_definitions_are_a_list() -> None:
    html = markdown_html(load_preset("visualness").instructions)
    assert html.count("<li>") == 5
    assert "<li>Strongly Disagree: the attribute cannot be inferred visually" in html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        '<a href="javascript:alert(1)">x</a>',
        "<b onmouseover=alert(1)>x</b>",
        "<iframe src=https://evil.example></iframe>",
        "<svg onload=alert(1)>",
    ],
)
def test_raw_html_is_text(text: str) -> None:
    html = markdown_html(text)
    assert "<" not in html.removeprefix("<p>").removesuffix("</p>")
    assert "&lt;" in html


@pytest.mark.parametrize(
    "target",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "&#106;avascript:alert(1)",
        "&#x6A;avascript:alert(1)",
        "vbscript:msgbox(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "file:///etc/passwd",
        "<javascript:alert(1)>",
    ],
)
def test_a_link_with_an_unsafe_scheme_is_no_link(target: str) -> None:
    html = markdown_html(f"[click]({target})")
    assert "<a" not in html and "href" not in html


def test_safe_links_open_in_a_new_tab() -> None:
    html = markdown_html(
        "[guide](https://example.org/a?b=1&c=2) [mail](mailto:x@example.org) [doc](/docs/x/)"
    )
    assert html.count('target="_blank" rel="noopener noreferrer nofollow"') == 3
    assert 'href="https://example.org/a?b=1&amp;c=2"' in html
    assert link_is_safe("https://x") and link_is_safe("/x") and not link_is_safe("java\nscript:1")


def test_headings_quotes_and_images_stay_text() -> None:
    html = markdown_html("# Title\n> quote\n![alt](https://x/y.png)")
    assert "<h1" not in html and "<blockquote" not in html and "<img" not in html


def test_the_first_paragraph_is_one_line_and_a_list_ends_it() -> None:
    text = load_preset("visualness").instructions
    first = first_paragraph_text(text)
    assert first.startswith(
        "You will see one attribute term at a time (a word or phrase that people use to describe a group"
    )
    assert first.endswith("for that attribute:") and "\n" not in first
    assert first_paragraph_text("\n\nA\nB\n\nC") == "A B"
    assert first_paragraph_text("") == ""


@pytest.mark.django_db
def test_the_task_page_serves_instructions_and_help_inert(client) -> None:
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    protocol = load_protocol_text(
        """
name: Hostile
unit: text
instructions: |
  <script>alert(1)</script> [x](javascript:alert(2))
  - a point
questions:
  - key: q
    kind: single
    prompt: <b>Pick</b>
    help: "**Bold** <img src=x onerror=alert(3)>"
    options: [a, b]
"""
    )
    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Hostile", protocol=protocol, overlap=1)
    from annotations.models import Item

    Item.objects.create(study=study, external_id="t", kind="text", text="term", sha256="0" * 64)
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    client.force_login(annotator)
    page = client.get(f"/annotate/studies/{study.pk}/next/", follow=True).content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'href="javascript' not in page and "<li>a point</li>" in page
    assert "<strong>Bold</strong> &lt;img src=x onerror=alert(3)&gt;" in page
    assert "<b>Pick</b>" not in page and "&lt;b&gt;Pick&lt;/b&gt;" in page
