"""Usernames that cannot pass for someone else's (docs/security.md, "Usernames").

A username is stored NFKC-normalised (``username_normalize``: full-width ``ａｄｍｉｎ`` is ``admin``) and
refused when it mixes scripts with look-alike letters (``username_mixes_lookalikes``: a Cyrillic ``а``
inside a Latin name), using the Unicode confusables data of ``confusable-homoglyphs``. Its *skeleton*
(``username_skeleton``: case folded, each letter that passes for a Latin one replaced by it) is what two
names are compared by: ``раураl`` (all Cyrillic) and ``PayPal`` share the skeleton ``paypal``; the
caller refuses a new name whose skeleton is an existing name's (``annotations.models.username_problem``).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from confusable_homoglyphs import confusables

# Printable ASCII only: the names whose skeleton is themselves, case folded.
ASCII_PRINTABLE = frozenset(chr(code) for code in range(0x20, 0x7F))


def username_normalize(name: str) -> str:
    """NFKC, as Django's ``AbstractBaseUser.normalize_username`` (full-width and compatibility forms)."""
    return unicodedata.normalize("NFKC", name)


@lru_cache(maxsize=4096)
def _latin_lookalike(char: str) -> str:
    found = confusables.is_confusable(char, greedy=True, preferred_aliases=["latin", "common"])
    for entry in found or []:
        for glyph in entry["homoglyphs"]:
            if glyph["c"] and all(c in ASCII_PRINTABLE for c in glyph["c"]):
                return str(glyph["c"]).casefold()
    return char


def username_skeleton(name: str) -> str:
    """What the name looks like: NFKC, case folded, every letter that passes for an ASCII one replaced."""
    folded = username_normalize(name).casefold()
    return "".join(c if c in ASCII_PRINTABLE else _latin_lookalike(c) for c in folded)


def username_mixes_lookalikes(name: str) -> bool:
    """True when the name mixes scripts and holds letters that pass for another script's (Unicode's
    "mixed-script confusable": ``pаypal`` with a Cyrillic ``а``). One script (``Ελληνικά``) is fine."""
    return bool(confusables.is_dangerous(username_normalize(name)))
