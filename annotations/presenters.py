"""How items and labellers are shown, for pages, the API and exports alike.

Selectors return where images are (``selectors.tasks.item_images``: item, position, size); the URLs
are built here, so reads never depend on the URL configuration. A machine labeller is shown to
researchers by ``labeller_summary`` (its kind and model; never its configuration, which may hold
API keys and internal addresses: docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from annotations.models import Annotator, Item
from annotations.selectors.tasks import item_images
from common.redaction import redact

LABELLER_SUMMARY_KEYS = ("kind", "model")


def labeller_summary(annotator: Annotator) -> dict[str, str]:
    """What everyone who may see a labeller sees of its configuration: its kind (vlm, clip, ...) and
    model (secrets masked even there, e.g. a model given as a URL with a password). Empty for people."""
    if not annotator.is_machine:
        return {}
    return {
        key: str(redact(annotator.config[key])) for key in LABELLER_SUMMARY_KEYS if annotator.config.get(key)
    }


@dataclass(frozen=True)
class ImageView:
    """One item image as drawn: its original and its resized display version."""

    position: int
    url: str
    display_url: str
    width: int | None
    height: int | None


def image_url(item_id: int, position: int) -> str:
    """The original image file (same access rule as the item)."""
    return reverse("item-image", args=[item_id, position])


def image_display_url(item_id: int, position: int) -> str:
    """The resized display version (at most 1024 px), cached by browsers for a year."""
    return reverse("item-image-display", args=[item_id, position])


def image_views(item: Item) -> list[ImageView]:
    """The item's images with files, in order, with their URLs (prefetch ``item.images``)."""
    return [
        ImageView(
            position=place.position,
            url=image_url(place.item_id, place.position),
            display_url=image_display_url(place.item_id, place.position),
            width=place.width,
            height=place.height,
        )
        for place in item_images(item)
    ]
