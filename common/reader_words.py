"""Notes the apps write for someone at the workbench, read by someone who is not there: the clauses
that tell how to switch something by a query string, a command flag, a settings name, a command, an
API path or a docs file are dropped. The findings page (it has its own controls beside the note) and
the audit report (reports/wording.py, for a paper's reader) both use :func:`without_tooling`."""

from __future__ import annotations

import re

# What a reader of a page or a paper does not act on: a query string, a command flag, a settings name,
# a command, an API path or a file of the workbench's docs.
TOOLING = re.compile(
    r"\?[a-z_]+=|(?<![\w-])--[a-z][\w-]*|\bWORKBENCH_[A-Z0-9_]+|manage\.py|/api/|\bdocs/[\w./-]+|"
    r"\bppi:[A-Z]+\b|page and API"
)
# One parenthesis (without another inside) that holds something of TOOLING.
_PAREN = re.compile(r"\s*\((?:[^()]*?)(?:" + TOOLING.pattern + r")[^()]*\)")
_CLAUSES = re.compile(r"(?<=[.;])\s+")


def without_tooling(text: str) -> str:
    """``text`` without every parenthesis and every clause (up to a full stop or semicolon) that holds
    something of ``TOOLING``; a clause cut at the end of its sentence leaves the sentence before it
    ending with a full stop. Letter case is left to the caller."""
    if not text:
        return text
    previous = None
    while previous != text:
        previous, text = text, _PAREN.sub("", text)
    kept: list[str] = []
    for clause in _CLAUSES.split(text):
        if TOOLING.search(clause):
            if clause.endswith(".") and kept and kept[-1].endswith(";"):
                kept[-1] = kept[-1][:-1] + "."
            continue
        kept.append(clause)
    return " ".join(kept)
