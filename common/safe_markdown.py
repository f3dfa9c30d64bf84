"""The one renderer of text that researchers write for annotators: protocol instructions and a
question's help, on the task page, every preview of it (the invitation preview, the study page, the
new-study page) and the annotator's dashboard.

The text is untrusted (a protocol is uploaded, imported from Label Studio, or typed in the form
builder), so it is read as a SAFE subset of Markdown with markdown-it-py (CommonMark): paragraphs
(lines of one paragraph are joined, so YAML's hard-wrapped block text reads as a paragraph),
bulleted and numbered lists, emphasis, inline code, and links whose scheme is http, https or mailto
(or none: a relative link). Raw HTML is never passed through: ``<script>`` comes out as the text
``&lt;script&gt;``. Headings, quotes, images, tables and code blocks are not read (their marks stay
text). A link opens in a new tab, so following one never leaves a task page.
docs/protocols.md, "Instructions and help", says what authors may write.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# The block and inline rules read; everything else stays text.
RULES = ["list", "emphasis", "link", "newline", "backticks", "escape", "entity"]
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def link_is_safe(url: str) -> bool:
    """Whether a link's target may be followed: http, https, mailto, or no scheme (a relative link).
    Control characters and spaces, which browsers drop from a scheme, are dropped first."""
    try:
        scheme = urlsplit(_CONTROL.sub("", url)).scheme.lower()
    except ValueError:
        return False
    return scheme in SAFE_SCHEMES or scheme == ""


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.attrSet("target", "_blank")
    token.attrSet("rel", "noopener noreferrer nofollow")
    return str(self.renderToken(tokens, idx, options, env))


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False})
    parser.enable(RULES)
    parser.validateLink = link_is_safe  # type: ignore[method-assign]  # markdown-it-py's documented hook
    parser.add_render_rule("link_open", _link_open)
    return parser


def markdown_html(text: str | None) -> SafeString:
    """``text`` (a safe Markdown subset) as HTML for a page; empty text gives an empty string."""
    if not text or not text.strip():
        return mark_safe("")
    html = str(_parser().render(text)).strip()
    return mark_safe(html)  # html is off: every tag is escaped


def first_paragraph_text(text: str | None) -> str:
    """The first paragraph of ``text`` as plain text, its lines joined (a one-line summary: the
    annotator's dashboard shortens it with an ellipsis). A list ends the paragraph."""
    lines: list[str] = []
    for line in (text or "").strip().splitlines():
        if not line.strip() or (lines and re.match(r"\s*([-*+]|\d+[.)])\s", line)):
            if lines:
                break
            continue
        lines.append(line.strip())
    return " ".join(lines)
