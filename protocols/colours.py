"""The colour vocabulary that ``text`` questions with ``normaliser: colour`` map answers onto.

SODA's released code compares raw colour strings, so "navy_blue" and "navy blue" count as
different findings. The workbench maps every colour answer (human or machine) onto twelve basic
colour terms (Berlin and Kay's eleven plus beige) before any metric sees it:

1. lower case, ``_``/``-`` become spaces, words like "coloured" and the suffix "-ish" go;
2. a basic term or a synonym (gray -> grey, violet -> purple) is taken as it is;
3. a CSS3 colour name (``webcolors``; "navy", "light blue" written with or without spaces) or a
   ``#rrggbb`` value is classified by hue, saturation and value (rules in :func:`basic_colour_of_rgb`);
4. otherwise the last, then the first word is tried ("navy blue" -> blue, "dark green" -> green).
Anything else is refused with the vocabulary in the message.
"""

from __future__ import annotations

import colorsys
import re

import webcolors

BASIC_COLOURS = (
    "black",
    "white",
    "grey",
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
    "beige",
)
SYNONYMS = {
    "gray": "grey",
    "violet": "purple",
    "magenta": "pink",
    "cyan": "blue",
    "aqua": "blue",
    "navy": "blue",
    "maroon": "red",
    "crimson": "red",
    "gold": "yellow",
    "golden": "yellow",
    "silver": "grey",
    "tan": "beige",
    "cream": "beige",
    "ivory": "white",
    "khaki": "beige",
    "teal": "green",
    "turquoise": "blue",
    "lavender": "purple",
    "scarlet": "red",
    "bronze": "brown",
    "copper": "orange",
    "charcoal": "grey",
    "olive": "green",
    "lime": "green",
    "indigo": "purple",
}
_FILLER = {"colored", "coloured", "color", "colour", "tone", "toned", "shade", "of"}
_HEX_RE = re.compile(r"^#?[0-9a-f]{6}$")


def basic_colour_of_rgb(red: int, green: int, blue: int) -> str:
    """The basic term for an sRGB colour, by HSV rules (hue in degrees, s and v in 0..1).

    v < 0.2 black; s < 0.15 white (v > 0.85) or grey; light, unsaturated yellowish beige;
    dark orange-red hues brown; otherwise by hue: red <15 or >=345 (pink when light and
    unsaturated), orange <45, yellow <70, green <170, blue <255, purple <320, pink <345.
    """
    h, s, v = colorsys.rgb_to_hsv(red / 255, green / 255, blue / 255)
    hue = h * 360
    if v < 0.2:
        return "black"
    if s < 0.15:
        return "white" if v > 0.85 else "grey"
    if s < 0.4 and v > 0.7 and 20 <= hue < 70:
        return "beige"
    if 10 <= hue < 45 and v < 0.65:
        return "brown"
    if hue < 15 or hue >= 345:
        return "pink" if s < 0.5 and v > 0.8 else "red"
    for limit, name in ((45, "orange"), (70, "yellow"), (170, "green"), (255, "blue"), (320, "purple")):
        if hue < limit:
            return name
    return "pink"


def _css_or_basic(word: str) -> str | None:
    if word in BASIC_COLOURS:
        return word
    if word in SYNONYMS:
        return SYNONYMS[word]
    try:
        rgb = webcolors.name_to_rgb(word)
    except ValueError:
        return None
    return basic_colour_of_rgb(rgb.red, rgb.green, rgb.blue)


def _drop_ish(word: str) -> str:
    """ "reddish" -> "red", "greenish" -> "green" (a doubled last consonant is undone)."""
    if not word.endswith("ish") or len(word) < 6:
        return word
    stem = word[:-3]
    return stem[:-1] if stem[-1] == stem[-2] else stem


def normalise_colour(text: str) -> str | None:
    """Map a colour answer onto :data:`BASIC_COLOURS`; None when it names no known colour."""
    cleaned = re.sub(r"[_\-/]+", " ", text.strip().lower())
    words = [_drop_ish(word) for word in cleaned.split() if word not in _FILLER]
    if not words:
        return None
    joined = "".join(words)
    if _HEX_RE.match(joined):
        rgb = webcolors.hex_to_rgb("#" + joined.lstrip("#"))
        return basic_colour_of_rgb(rgb.red, rgb.green, rgb.blue)
    for candidate in (" ".join(words), joined, words[-1], words[0]):
        found = _css_or_basic(candidate)
        if found is not None:
            return found
    return None
