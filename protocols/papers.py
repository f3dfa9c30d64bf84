"""The papers behind the presets: a short citation and the title of each ``paper`` key a protocol
names (``protocols/presets/*.yaml``).

Plain Python, like the rest of ``protocols``: the study-creation page names each preset
by its paper (``preset_label``).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols.schema import Protocol


@dataclass(frozen=True)
class Paper:
    key: str
    citation: str  # short: "ViSAGe (Jha et al., ACL 2024)"
    title: str


PAPERS: dict[str, Paper] = {
    paper.key: paper
    for paper in (
        Paper(
            "visage",
            "ViSAGe (Jha et al., ACL 2024)",
            "Beyond the Surface: A Global-Scale Analysis of Visual Stereotypes in Text-to-Image Generation",
        ),
        Paper(
            "ssi",
            "SSI rubric (Barve et al. 2025)",
            "Can we Debias Social Stereotypes in AI-Generated Images? Examining Text-to-Image Outputs "
            "and User Perceptions",
        ),
        Paper(
            "biasconnect",
            "BiasConnect (Shukla et al. 2025)",
            "Mitigate One, Skew Another? Tackling Intersectional Biases in Text-to-Image Models",
        ),
        Paper(
            "agent",
            "Stereotype agent (Wang et al. 2024)",
            "Language Agents for Detecting Implicit Stereotypes in Text-to-image Models at Scale",
        ),
        Paper(
            "soda",
            "SODA (Choi et al. 2025)",
            "When Cars Have Stereotypes: Auditing Demographic Bias in Objects from Text-to-Image Models",
        ),
    )
}


def paper_of(protocol: Protocol) -> Paper | None:
    return PAPERS.get(protocol.paper)


def preset_label(protocol: Protocol) -> str:
    """How a preset is named in a list: "ViSAGe (Jha et al., ACL 2024): Visual stereotype markers"."""
    paper = paper_of(protocol)
    return f"{paper.citation}: {protocol.name}" if paper else protocol.name
