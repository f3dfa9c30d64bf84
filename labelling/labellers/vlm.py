"""A vision-language model behind an OpenAI-compatible chat API, answering a study's questions.

One request per item: the preset's prompt template (``labelling/prompt_templates/``) filled
with the item's questions and the JSON answer format expected, followed by the item's images as
base64 data URLs ("Image 1", "Image 2"... for an image set). The model is asked for JSON twice:
in the prompt, and with ``response_format={"type": "json_object"}`` unless ``json_mode`` is off
(some servers refuse that field). The answer is parsed robustly (bare JSON, a ```json fence, or
JSON inside prose; :mod:`labelling.labellers.parsing`), then every question is validated on its
own (:mod:`labelling.labellers.answers`): one bad answer fails that question only.

Per outcome: ``raw`` is the model's whole text; ``latency_s`` the request's wall time (retries
included); ``cost_usd`` = (prompt_tokens · price_per_1k_prompt_tokens + completion_tokens ·
price_per_1k_completion_tokens) / 1000 for the request, shared equally among the questions it
answered (so sums over outcomes give the bill), None without prices, 0.0 for a cache hit.

Config keys (besides :class:`~common.chat_client.ChatSettings` fields such as ``base_url``,
``model``, ``api_key_env``, timeouts, ``max_retries``, ``max_concurrency``,
``requests_per_minute``): ``template`` (a preset template name or a file path; default
``generic``), ``template_text`` (the template itself, overrides ``template``), ``temperature``
(0.0, as soda used), ``max_tokens`` (1024), ``json_mode`` (True), ``image_format`` (``png``),
``max_image_side`` (None: images sent at full size), ``concurrency`` (items labelled in parallel
threads; default ``max_concurrency``), the two prices.
"""

from __future__ import annotations

import hashlib
import string
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common.chat_client import ChatClient, ChatError, ChatSettings, image_data_url
from labelling.cache import CachedAnswer, LabelCache, label_cache_key
from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import (
    LabelItem,
    Labeller,
    LabellerError,
    LabelOutcome,
    Question,
    failed_outcomes,
)
from labelling.labellers.parsing import NoJsonObject, extract_json_object

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "prompt_templates"
PRESET_TEMPLATES = {
    "ssi-rubric": "ssi",
    "object-attributes": "soda",
    "bias-axes": "biasconnect",
    "subgroup": "agent",
    "stereotype-markers": "visage",
}
SUPPORTED_KINDS = ("likert", "single", "multi", "binary", "text")
_WRAPPER_KEYS = ("answer", "value", "score")


class TemplateError(LabellerError):
    """A template cannot be loaded or filled for an item."""


def template_for_protocol(protocol_key: str) -> str:
    """The template name for a protocol preset key; ``generic`` for a researcher's own protocol."""
    return PRESET_TEMPLATES.get(protocol_key, "generic")


def load_template(name_or_path: str) -> str:
    """Text of a named template (``ssi``, ``soda``...) or of a template file path."""
    named = TEMPLATE_DIR / f"{name_or_path}.txt"
    path = named if named.is_file() else Path(name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in TEMPLATE_DIR.glob("*.txt")))
        raise TemplateError(f"no template '{name_or_path}' (named templates: {known}; or give a file path)")
    return path.read_text(encoding="utf-8")


def _options_text(options: Sequence[Mapping[str, str]]) -> str:
    return "; ".join(f'"{option["key"]}" = {option.get("label", option["key"])}' for option in options)


def describe_question(question: Question) -> str:
    """One prompt line: key, what to answer, the question's prompt and its options by key."""
    key, kind, prompt = question["key"], question["kind"], question["prompt"]
    options = list(question.get("options") or [])
    if kind == "single":
        return f'- "{key}": {prompt} Choose one option: {_options_text(options)}.'
    if kind == "likert":
        line = f'- "{key}": {prompt} Choose one point of the scale (in order): {_options_text(options)}.'
        if question.get("unsure"):
            line += f' If you cannot tell, answer "{question["unsure"]["key"]}".'
        return line
    if kind == "multi":
        line = (
            f'- "{key}": {prompt} Choose every option that applies (a list of keys): '
            f"{_options_text(options)}."
        )
        if question.get("none_option"):
            line += f' If none applies, answer ["{question["none_option"]["key"]}"] alone.'
        return line
    if kind == "binary":
        return f'- "{key}": {prompt} Score 1 (yes) or 0 (no), with the reason and image number(s).'
    if question.get("normaliser") == "colour":
        return f'- "{key}": {prompt} Write the actual observed colour (e.g. "navy_blue", "forest_green").'
    return f'- "{key}": {prompt} Answer with a short text.'


def answer_format(questions: Sequence[Question]) -> str:
    """The JSON object the model must return, one entry per question key, as pretty text."""
    lines = []
    for question in questions:
        kind = question["kind"]
        if kind in ("single", "likert"):
            shape = '"<one option key>"'
        elif kind == "multi":
            shape = '["<option key>", ...]'
        elif kind == "binary":
            shape = '{"score": 0 or 1, "reason": "<why, naming the image number(s)>"}'
        else:
            shape = '"<text>"'
        lines.append(f'  "{question["key"]}": {shape}')
    return "{\n" + ",\n".join(lines) + "\n}"


def _placeholder_value(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        return ", ".join(value)
    return None


def render_prompt(template: str, item: LabelItem, questions: Sequence[Question]) -> str:
    """Fill ``template`` for the item (see labeller_templates/README.md); :class:`TemplateError` if it
    cannot."""
    values = {
        key: text for key, value in item.metadata.items() if (text := _placeholder_value(value)) is not None
    }
    count = len(item.images)
    query = item.metadata.get("prompt") or item.metadata.get("query") or item.text or ""
    values.update(
        query=str(query),
        questions="\n".join(describe_question(question) for question in questions),
        answer_format=answer_format(questions),
        image_count=str(count),
        images="this image" if count == 1 else (f"these {count} images" if count else "the text below"),
    )
    try:
        prompt = string.Template(template).substitute(values)
    except KeyError as error:
        raise TemplateError(f"template placeholder ${error.args[0]} has no value for this item") from error
    except ValueError as error:
        raise TemplateError(f"template is malformed: {error}") from error
    if not count and item.text:
        prompt += f"\n\nText: {item.text}"
    return prompt


def build_messages(
    prompt: str, item: LabelItem, *, image_format: str = "png", max_side: int | None = None
) -> list[dict[str, Any]]:
    """One user message: the prompt, then each image (labelled "Image n:" for an image set)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for index, image in enumerate(item.images, start=1):
        if len(item.images) > 1:
            content.append({"type": "text", "text": f"Image {index}:"})
        url = image_data_url(image, image_format=image_format, max_side=max_side)
        content.append({"type": "image_url", "image_url": {"url": url}})
    return [{"role": "user", "content": content}]


def _find_entry(answers: Mapping[str, Any], key: str) -> tuple[Any, bool]:
    if key in answers:
        return answers[key], True
    # Models sometimes group answers (soda's own format nests "product_features": {...}).
    for value in answers.values():
        if isinstance(value, Mapping) and key in value:
            return value[key], True
    return None, False


def _unwrap(entry: Any) -> tuple[Any, Any]:
    if isinstance(entry, Mapping):
        for name in _WRAPPER_KEYS:
            if name in entry:
                return entry[name], entry.get("reason")
    return entry, None


def parse_answers(raw: str, questions: Sequence[Question]) -> list[tuple[str, Any, str | None, str | None]]:
    """``(question_key, value, reason, error)`` per question from the model's text; never coerces."""
    try:
        answers = extract_json_object(raw)
    except NoJsonObject as error:
        return [(question["key"], None, None, str(error)) for question in questions]
    results: list[tuple[str, Any, str | None, str | None]] = []
    for question in questions:
        entry, found = _find_entry(answers, question["key"])
        if not found:
            results.append(
                (question["key"], None, None, f"no answer for '{question['key']}' in the JSON object")
            )
            continue
        value, reason = _unwrap(entry)
        try:
            clean, clean_reason = validate_answer(question, value, reason)
        except InvalidAnswer as error:
            results.append((question["key"], None, None, str(error)))
        else:
            results.append((question["key"], clean, clean_reason, None))
    return results


def _image_digests(item: LabelItem) -> list[str]:
    if item.image_sha256 and len(item.image_sha256) == len(item.images):
        return list(item.image_sha256)
    return [
        hashlib.sha256(f"{image.mode}{image.size}".encode() + image.tobytes()).hexdigest()
        for image in item.images
    ]


class VlmLabeller(Labeller):
    kind = "vlm"

    def __init__(
        self,
        *,
        name: str,
        version: str = "1",
        config: Mapping[str, Any] | None = None,
        cache: LabelCache | None = None,
        client: ChatClient | None = None,
    ) -> None:
        super().__init__(name=name, version=version, config=config)
        if "base_url" not in self.config or "model" not in self.config:
            raise LabellerError("a VLM labeller needs 'base_url' and 'model' in its config")
        self.settings = ChatSettings.from_config(self.config)
        self.template_name = str(self.config.get("template", "generic"))
        self.template = (
            str(self.config["template_text"])
            if "template_text" in self.config
            else load_template(self.template_name)
        )
        self.cache = cache
        self._client = client
        self._client_lock = threading.Lock()

    @property
    def client(self) -> ChatClient:
        # Built on first use, so listing what a labeller supports never needs its API key.
        with self._client_lock:
            if self._client is None:
                self._client = ChatClient(self.settings)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def supports(self, question: Question) -> bool:
        return question.get("kind") in SUPPORTED_KINDS

    def request_settings(self) -> dict[str, Any]:
        """Everything besides images, prompt and model that changes the answer (part of the cache key)."""
        return {
            "temperature": self.config.get("temperature", 0.0),
            "max_tokens": self.config.get("max_tokens", 1024),
            "json_mode": bool(self.config.get("json_mode", True)),
            "image_format": self.config.get("image_format", "png"),
            "max_image_side": self.config.get("max_image_side"),
        }

    def cost_usd(self, usage: Mapping[str, int]) -> float | None:
        """(prompt_tokens · price_in + completion_tokens · price_out) / 1000; None without prices."""
        price_in = self.config.get("price_per_1k_prompt_tokens")
        price_out = self.config.get("price_per_1k_completion_tokens")
        if price_in is None and price_out is None:
            return None
        return (
            usage.get("prompt_tokens", 0) * float(price_in or 0.0)
            + usage.get("completion_tokens", 0) * float(price_out or 0.0)
        ) / 1000.0

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        if not asked or not items:
            return []
        workers = int(self.config.get("concurrency", self.settings.max_concurrency))
        if workers <= 1 or len(items) == 1:
            per_item = [self.label_item(item, asked) for item in items]
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
                per_item = list(pool.map(lambda item: self.label_item(item, asked), items))
        return [outcome for outcomes in per_item for outcome in outcomes]

    def label_item(self, item: LabelItem, questions: Sequence[Question]) -> list[LabelOutcome]:
        """Outcomes for one item (one request, or none on a cache hit)."""
        questions = self.supported(questions)
        if not item.images and not item.text:
            return failed_outcomes(item, questions, "item has neither images nor text")
        try:
            prompt = render_prompt(self.template, item, questions)
        except TemplateError as error:
            return failed_outcomes(item, questions, str(error))
        settings = self.request_settings()
        key = label_cache_key(
            image_sha256=_image_digests(item),
            prompt=prompt,
            model=self.settings.model,
            settings={**settings, "template": self.template_name},
        )
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            return self._outcomes(item, questions, cached.raw, 0.0, cached.usage, cached=True)
        messages = build_messages(
            prompt, item, image_format=settings["image_format"], max_side=settings["max_image_side"]
        )
        try:
            response = self.client.complete(
                messages,
                temperature=settings["temperature"],
                max_tokens=settings["max_tokens"],
                response_format={"type": "json_object"} if settings["json_mode"] else None,
            )
        except ChatError as error:
            return failed_outcomes(item, questions, f"request failed: {error}", raw=error.body)
        outcomes = self._outcomes(
            item, questions, response.text, response.latency_s, response.usage, cached=False
        )
        if self.cache is not None and all(outcome.ok for outcome in outcomes):
            self.cache.set(key, CachedAnswer(raw=response.text, usage=response.usage, model=response.model))
        return outcomes

    def _outcomes(
        self,
        item: LabelItem,
        questions: Sequence[Question],
        raw: str,
        latency_s: float,
        usage: Mapping[str, int],
        *,
        cached: bool,
    ) -> list[LabelOutcome]:
        cost = self.cost_usd(usage)
        if cost is not None:
            cost = 0.0 if cached else cost / len(questions)
        return [
            LabelOutcome(item.item_id, key, value, reason, raw, error, latency_s, cost, cached)
            for key, value, reason, error in parse_answers(raw, questions)
        ]
