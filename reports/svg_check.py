"""The check a figure's SVG passes before a page or a report inlines it (docs/security.md, "Reports").

The figure code draws with matplotlib, whose SVG is trusted markup, but a figure's titles and labels
are untrusted text and an SVG can carry script in many places. So the SVG is parsed as XML
(defusedxml: no entities, no external references) and refused when it holds anything active: a
``script``, ``foreignObject``, ``iframe``, ``object``, ``embed``, ``a``, ``feImage``, an animation
(``animate``, ``set``: they can change a link), a ``handler``, an ``on*`` attribute, a link
(``href``, ``xlink:href``) anywhere but to ``#fragment`` or a ``data:image/(png|jpeg|gif)`` picture,
or a style sheet with ``@import``, ``expression(`` or a ``url(`` that is not ``url(#...)``. What
passes is written out again from the parsed tree (comments, processing instructions, the XML
declaration and the DOCTYPE left out), so what is inlined is exactly what was checked.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET  # only to write out a tree defusedxml parsed

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

REFUSED_ELEMENTS = frozenset(
    {
        "script",
        "foreignobject",
        "iframe",
        "object",
        "embed",
        "animate",
        "animatemotion",
        "animatetransform",
        "set",
        "handler",
        "listener",
        "a",
        "feimage",
    }
)
# Elements left out of the written SVG (matplotlib's metadata: RDF, harmless but not needed).
DROPPED_ELEMENTS = frozenset({"metadata"})
SAFE_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*$")
UNSAFE_CSS = re.compile(
    r"@import|expression\s*\(|url\s*\(\s*(?!['\"]?#)|javascript:|behavior\s*:", re.IGNORECASE
)


class UnsafeSvg(ValueError):
    """The SVG holds something active (or is not well-formed XML): it is not inlined."""


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1].lower()


def svg_checked(svg: str) -> str:
    """The SVG written out again from its parsed tree once nothing active is found in it;
    :class:`UnsafeSvg` naming what was found otherwise."""
    try:
        root = SafeET.fromstring(svg.encode("utf-8"))
    except (ET.ParseError, DefusedXmlException, ValueError) as exc:
        raise UnsafeSvg(f"the figure is not well-formed SVG ({exc})") from exc
    if _local(root.tag) != "svg":
        raise UnsafeSvg("the figure's root element is not <svg>")
    for parent in root.iter():
        for child in list(parent):
            if not isinstance(child.tag, str):
                parent.remove(child)
            elif _local(child.tag) in DROPPED_ELEMENTS:
                parent.remove(child)
    for element in root.iter():
        name = _local(element.tag)
        if name in REFUSED_ELEMENTS:
            raise UnsafeSvg(f"the figure holds a <{name}> element")
        for attribute, value in element.attrib.items():
            attr = _local(attribute)
            if attr.startswith("on"):
                raise UnsafeSvg(f"the figure holds an event attribute {attr}")
            if attr == "href" and not (value.startswith("#") or SAFE_DATA_IMAGE.match(value)):
                raise UnsafeSvg("the figure links outside itself")
            if attr == "style" and UNSAFE_CSS.search(value):
                raise UnsafeSvg("the figure's style loads or runs something")
        if name == "style" and UNSAFE_CSS.search("".join(element.itertext())):
            raise UnsafeSvg("the figure's style sheet loads or runs something")
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    return ET.tostring(root, encoding="unicode")
