"""``{% load markup %}``: ``{{ text|markdown }}`` renders a protocol's instructions or a question's help
through the one safe renderer, ``common/safe_markdown.py`` (no raw HTML, safe link schemes)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from common.safe_markdown import markdown_html

register = template.Library()


@register.filter(name="markdown")
def markdown(text: str | None) -> SafeString:
    return markdown_html(text)
