"""Text for a reader of a paper: the strings the findings app writes for its page, API and commands,
rewritten where the report prints them (docs/reports.md, "Written for a paper").

The findings' notes speak to someone at the workbench: "Switch with ?source=NAME (page and API) or
--source NAME (manage.py metrics)", "(docs/metrics.md, Reliability gate)", "p_adjusted: ...". A paper's
reader cannot follow a query string, a command flag, a settings name or a file of the workbench's docs,
so :func:`reader_text` drops every parenthesis and every clause that holds one, names a labeller
``name@version`` (or ``ppi:name@version``) in words, and says a column's identifier as words.
:func:`labeller_words` is how a labeller is named in the report's prose ("colour-rule c8b2d0e").

Only strings the workbench itself writes go through here (notes, reasons, method records, generated
paragraphs); untrusted data (names, prompts, labels) is never rewritten.
"""

from __future__ import annotations

import re

from common.reader_words import without_tooling

# A labeller's key: name@version, ppi:name@version or ppi:name.
_KEY = re.compile(r"\b(ppi:)?([A-Za-z0-9][\w.+-]*?)@([\w.+-]*[\w])|\bppi:([A-Za-z0-9][\w.+-]*[\w])")
_HEX = re.compile(r"[0-9a-f]{8,}")
# A labeller's version written out whole in words ("colour-rule c8b2d0e364c"): shortened like a commit.
_VERSION_WORD = re.compile(r"(?<=[\w-] )([0-9a-f]{7})[0-9a-f]{3,}\b(?=[^@]|$)")
# Column identifiers that a sentence says in words (a table's heading keeps the identifier).
IDENTIFIERS = {
    "significant_adjusted": "significant after correction",
    "p_adjusted": "corrected p",
    "p_value": "raw p",
    "n_items": "items",
}
_IDENTIFIER = re.compile(r"\b(" + "|".join(IDENTIFIERS) + r")\b")


def labeller_words(name: str) -> str:
    """A labeller's ``name@version`` as a person reads it: the name and a 7-character version where the
    version is a hash ("colour-rule c8b2d0e"), "vlm-x v1" for a numbered one; ``ppi:`` sources as the
    labeller "+ human sample"."""
    if name.startswith("ppi:"):
        return labeller_words(name[4:]) + " + human sample"
    base, _at, version = name.partition("@")
    if not version:
        return base
    if _HEX.fullmatch(version):
        return f"{base} {version[:7]}"
    plain = version.removeprefix("v")
    return f"{base} v{plain}" if plain[:1].isdigit() else f"{base} {version}"


def _key_words(match: re.Match[str]) -> str:
    if match.group(4):
        return labeller_words("ppi:" + match.group(4))
    return labeller_words((match.group(1) or "") + f"{match.group(2)}@{match.group(3)}")


def _tidy(text: str) -> str:
    """Punctuation left by a removed part put right: no ".;", no space before a stop, one space."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([.,;:])", r"\1", text)
    text = re.sub(r"([.;:,])(?:\s*[.;:,])+", r"\1", text)
    text = re.sub(r"\(\s*\)", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text


def reader_text(text: str) -> str:
    """``text`` (a note, reason, method record or generated sentence) for a reader of a paper: every
    parenthesis and clause that names a query string, flag, settings name, command, API path or docs
    file dropped; labeller keys in words; column identifiers in words; the punctuation tidied."""
    if not text:
        return text
    capital = text[:1].isupper() or bool(_IDENTIFIER.match(text))
    text = without_tooling(text)
    text = _KEY.sub(_key_words, text)
    text = _VERSION_WORD.sub(lambda m: m.group(1) if re.search(r"[a-f]", m.group(0)) else m.group(0), text)
    text = _IDENTIFIER.sub(lambda m: IDENTIFIERS[m.group(1)], text)
    text = _tidy(text)
    # a sentence that now starts with a plain small word after a stop (never a key such as "cup_shape")
    start = r"(^|[.!?]\s+)" if capital else r"([.!?]\s+)"
    return re.sub(start + r"([a-z])(?=[a-z]*[\s,;:])", lambda m: m.group(1) + m.group(2).upper(), text)


def joined(parts: list[str], sep: str = "; ") -> str:
    """Clauses joined into one sentence: each one's own final stop dropped first (no "0.05.; as in")."""
    return sep.join(part.rstrip().rstrip(".").rstrip() for part in parts if part.strip())
