"""Protocols: the questions of a study, loaded from YAML (presets and researchers' files alike).

A protocol file is validated strictly on load: unknown fields, wrong kinds, missing options,
dangling references are reported with the line and the field at fault, e.g.
``line 7, questions[0].kind: 'singel' is not one of likert, single, multi, binary, text, boxes``.
The schema is documented in ``docs/protocols.md``; presets live in ``protocols/``.
This module is plain Python (no Django models), so labellers and scripts can use it too.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import yaml

from common.checked_input import CheckedSafeLoader, InputRefused, json_value_check

PRESET_DIR = Path(__file__).resolve().parent / "presets"

UNITS = ("image", "image_set", "text")
KINDS = ("likert", "single", "multi", "binary", "text", "boxes")
NORMALISERS = ("none", "lowercase", "colour")
REASON_MODES = ("none", "optional", "required")
# boxes questions: ``each_selected`` = every option selected in the linked multi question needs a box.
BOXES_REQUIRED = ("none", "each_selected")
KEY_RE = re.compile(r"^[a-z0-9_]{1,64}$")
PLACEHOLDER_RE = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")
NONE_OPTION_KEY = "none_of_the_above"
UNSURE_KEY = "unsure"

_TOP_FIELDS = {"key", "name", "paper", "unit", "instructions", "description", "questions", "version"}
_COMMON_FIELDS = {"key", "kind", "prompt", "help", "required", "expert_only", "applies_if", "show_if"}
_KIND_FIELDS = {
    "likert": {"options", "unsure"},
    "single": {"options", "options_from"},
    "multi": {"options", "options_from", "none_option", "page_size", "require_all_shown"},
    "binary": {"reason"},
    "text": {"normaliser"},
    "boxes": {"linked_question", "boxes_required"},
}
# Fields written by ``Question.to_dict`` only when they differ from their default (added after
# studies were stored, so a stored protocol's dict does not change when it is reloaded).
_OMITTED_AT_DEFAULT = {"require_all_shown": False, "boxes_required": "none"}
_FIELD_KINDS = {
    name: sorted(kind for kind, names in _KIND_FIELDS.items() if name in names)
    for name in set().union(*_KIND_FIELDS.values())
}


class ProtocolError(ValueError):
    """A protocol file or dict that does not follow the schema; says where and what."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None, source: str = "") -> None:
        self.message = message
        self.path = path
        self.line = line
        self.source = source
        where = []
        if source:
            where.append(source)
        if line is not None:
            where.append(f"line {line}")
        if path:
            where.append(path)
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


@lru_cache(maxsize=65536)  # options_from lists are re-slugified for every answer checked
def slugify_option(label: str) -> str:
    """Option key for a label: lower case, runs of other characters become one underscore."""
    slug = re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")
    return slug[:64] or "option"


@dataclass(frozen=True)
class Option:
    key: str
    label: str


@dataclass(frozen=True)
class Question:
    key: str
    kind: str
    prompt: str
    help: str = ""
    required: bool = True
    expert_only: bool = False
    options: tuple[Option, ...] = ()
    options_from: str | None = None
    unsure: Option | None = None
    none_option: Option | None = None
    page_size: int | None = None
    reason: str = "none"
    normaliser: str = "none"
    linked_question: str | None = None
    require_all_shown: bool = False
    boxes_required: str = "none"
    applies_if: dict[str, Any] | None = None
    show_if: dict[str, Any] | None = None

    @property
    def is_choice(self) -> bool:
        return self.kind in ("likert", "single", "multi")

    def applies_to(self, metadata: dict[str, Any]) -> bool:
        """Whether this question exists for an item with this metadata (``applies_if``)."""
        if not self.applies_if:
            return True
        value = metadata.get(self.applies_if["field"])
        return str(value) in self.applies_if["in"] if value is not None else False

    def options_for(self, metadata: dict[str, Any]) -> tuple[Option, ...]:
        """The scale or choice options for one item: declared, or from the item's metadata."""
        if self.options_from is None:
            return self.options
        raw = metadata.get(self.options_from) or []
        return tuple(Option(key=slugify_option(str(label)), label=str(label)) for label in raw)

    def choice_keys(self, metadata: dict[str, Any]) -> list[str]:
        """Every key an answer may use: options, plus Unsure (likert) or None of the above (multi)."""
        keys = [option.key for option in self.options_for(metadata)]
        if self.unsure is not None:
            keys.append(self.unsure.key)
        if self.none_option is not None:
            keys.append(self.none_option.key)
        return keys

    def render_prompt(self, *, text: str | None = None, metadata: dict[str, Any] | None = None) -> str:
        """The prompt with ``{text}`` and ``{metadata_field}`` filled; unknown placeholders stay."""
        values = {
            key: str(value) for key, value in (metadata or {}).items() if not isinstance(value, list | dict)
        }
        if text is not None:
            values["text"] = text

        def fill(match: re.Match[str]) -> str:
            return values.get(match.group(1), match.group(0))

        return PLACEHOLDER_RE.sub(fill, self.prompt)

    @cached_property
    def schema_dict(self) -> dict[str, Any]:
        """``to_dict()`` built once per question object, shared: read it, never change it (the claim
        answers with every question of its item; a protocol is parsed once per study version, so its
        questions live as long as that version)."""
        return self.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The question as the schema writes it (only this kind's fields), so it reloads unchanged."""
        data = asdict(self)
        data["options"] = [asdict(option) for option in self.options]
        allowed = _COMMON_FIELDS | _KIND_FIELDS[self.kind]
        return {
            key: value
            for key, value in data.items()
            if key in allowed
            and value not in (None, (), [], "")
            and not (key in _OMITTED_AT_DEFAULT and value == _OMITTED_AT_DEFAULT[key])
        }


@dataclass(frozen=True)
class Protocol:
    name: str
    unit: str
    questions: tuple[Question, ...]
    key: str = ""
    paper: str = ""
    instructions: str = ""
    description: str = ""
    version: int = 1
    _index: dict[str, Question] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({question.key: question for question in self.questions})

    def question(self, key: str) -> Question:
        return self._index[key]

    def has_question(self, key: str) -> bool:
        return key in self._index

    def questions_for(self, metadata: dict[str, Any]) -> list[Question]:
        return [question for question in self.questions if question.applies_to(metadata)]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "unit": self.unit, "version": self.version}
        for name in ("key", "paper", "instructions", "description"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        data["questions"] = [question.to_dict() for question in self.questions]
        return data


# --- Loading ------------------------------------------------------------------------------------


class _Located(dict[Any, Any]):
    """A YAML mapping that remembers its own line and each key's line."""

    line: int | None = None
    key_lines: dict[str, int]


class _LineLoader(CheckedSafeLoader):
    """Refuses nesting and integers no layer may take, with the line (``common.checked_input``)."""


def _construct_located(loader: _LineLoader, node: yaml.MappingNode) -> _Located:
    mapping = _Located(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {str(key_node.value): key_node.start_mark.line + 1 for key_node, _value in node.value}
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_located)


def load_protocol_text(text: str, *, source: str = "") -> Protocol:
    """Parse and validate protocol YAML (or JSON, which is YAML)."""
    try:
        data = yaml.load(text, Loader=_LineLoader)  # SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ProtocolError(f"not valid YAML: {exc.problem}", line=line, source=source) from exc
    except yaml.YAMLError as exc:
        raise ProtocolError(f"not valid YAML: {exc}", source=source) from exc
    return protocol_from_dict(data, source=source)


def load_protocol_file(path: str | Path) -> Protocol:
    """Load and validate a protocol file; errors name the file, line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProtocolError(f"cannot read the file: {exc.strerror}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ProtocolError("the file is not UTF-8 text", source=str(path)) from exc
    return load_protocol_text(text, source=path.name)


def list_presets() -> list[str]:
    """Keys of the shipped presets (file names under ``protocols/``)."""
    return sorted(path.stem for path in PRESET_DIR.glob("*.yaml"))


def load_preset(key: str) -> Protocol:
    """A shipped preset, parsed once per version of its file (the new-study page reads every preset
    on each request; a ``Protocol`` is frozen, so one is shared)."""
    if key not in list_presets():
        raise ProtocolError(f"unknown preset {key!r}; presets: {', '.join(list_presets())}")
    return _preset_parsed(key, (PRESET_DIR / f"{key}.yaml").stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _preset_parsed(key: str, _mtime_ns: int) -> Protocol:
    """``key``'s preset file parsed; ``_mtime_ns`` keys the cache, so an edited file is read again."""
    protocol = load_protocol_file(PRESET_DIR / f"{key}.yaml")
    return protocol if protocol.key else Protocol(**{**_protocol_fields(protocol), "key": key})


def _protocol_fields(protocol: Protocol) -> dict[str, Any]:
    return {
        name: getattr(protocol, name)
        for name in ("name", "unit", "questions", "key", "paper", "instructions", "description", "version")
    }


def protocol_from_dict(data: Any, *, source: str = "") -> Protocol:
    """Validate a protocol given as a dict (from YAML, JSON or a stored study) and build it. Values no
    database can store (null characters, lone surrogates, NaN, nesting too deep) are refused first."""
    try:
        json_value_check(data, where="protocol")
    except InputRefused as exc:
        raise ProtocolError(exc.message, source=source) from exc
    return _Validator(source).protocol(data)


def protocol_stored(data: Any, *, source: str = "") -> Protocol:
    """``protocol_from_dict`` for a stored study's protocol, parsed once per version of its text.

    Every request loads its study afresh, and parsing and validating a protocol cost about as much as
    the rest of a submit; the parsed ``Protocol`` (frozen, shared between requests) is kept keyed by
    ``source`` and the protocol's JSON text, so a changed protocol is parsed again and an unchanged one
    never (docs/protocols.md, "Parsing"). The oldest entry goes past ``PARSED_KEPT``; a protocol that
    is not valid is not kept.
    """
    try:
        key = (source, json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    except (TypeError, ValueError):
        return protocol_from_dict(data, source=source)
    protocol = _parsed.get(key)
    if protocol is None:
        protocol = protocol_from_dict(data, source=source)
        if len(_parsed) >= PARSED_KEPT:
            _parsed.pop(next(iter(_parsed)), None)
        _parsed[key] = protocol
    return protocol


PARSED_KEPT = 512
_parsed: dict[tuple[str, str], Protocol] = {}


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str, *, path: str, mapping: Any = None, key: str | None = None) -> ProtocolError:
        line = None
        if isinstance(mapping, _Located):
            line = mapping.key_lines.get(key, mapping.line) if key is not None else mapping.line
        return ProtocolError(message, path=path, line=line, source=self.source)

    def string(
        self, mapping: dict[str, Any], key: str, path: str, *, required: bool, default: str = ""
    ) -> str:
        if key not in mapping or mapping[key] is None:
            if required:
                raise self.fail(f"'{key}' is required", path=path or key, mapping=mapping)
            return default
        value = mapping[key]
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.fail("must be text", path=f"{path}.{key}" if path else key, mapping=mapping, key=key)
        return str(value)

    def boolean(self, mapping: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = mapping.get(key, default)
        if not isinstance(value, bool):
            raise self.fail("must be true or false", path=f"{path}.{key}", mapping=mapping, key=key)
        return value

    def protocol(self, data: Any) -> Protocol:
        if not isinstance(data, dict):
            raise ProtocolError(
                "a protocol must be a mapping with name, unit and questions", source=self.source
            )
        unknown = sorted(set(data) - _TOP_FIELDS)
        if unknown:
            raise self.fail(
                f"unknown field '{unknown[0]}'; allowed: {', '.join(sorted(_TOP_FIELDS))}",
                path=unknown[0],
                mapping=data,
                key=unknown[0],
            )
        name = self.string(data, "name", "", required=True)
        unit = self.string(data, "unit", "", required=True)
        if unit not in UNITS:
            raise self.fail(
                f"'{unit}' is not one of {', '.join(UNITS)}", path="unit", mapping=data, key="unit"
            )
        key = self.string(data, "key", "", required=False)
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise self.fail("must be a positive integer", path="version", mapping=data, key="version")
        raw_questions = data.get("questions")
        if not isinstance(raw_questions, list) or not raw_questions:
            raise self.fail(
                "'questions' must be a non-empty list", path="questions", mapping=data, key="questions"
            )
        questions: list[Question] = []
        for index, raw in enumerate(raw_questions):
            questions.append(self.question(raw, index, unit, {q.key: q for q in questions}, data))
        return Protocol(
            name=name,
            unit=unit,
            questions=tuple(questions),
            key=key,
            paper=self.string(data, "paper", "", required=False),
            instructions=self.string(data, "instructions", "", required=False),
            description=self.string(data, "description", "", required=False),
            version=version,
        )

    def options(self, raw: Any, path: str, mapping: Any, key: str) -> tuple[Option, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.fail("must be a non-empty list of options", path=path, mapping=mapping, key=key)
        options = []
        for index, item in enumerate(raw):
            options.append(self.option(item, f"{path}[{index}]", mapping, key))
        keys = [option.key for option in options]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise self.fail(
                f"option key '{duplicates[0]}' appears twice", path=path, mapping=mapping, key=key
            )
        return tuple(options)

    def option(self, item: Any, path: str, mapping: Any, key: str, default_key: str | None = None) -> Option:
        if isinstance(item, bool) or item is None:
            raise self.fail("an option must be text or {key, label}", path=path, mapping=mapping, key=key)
        if isinstance(item, str | int | float):
            label = str(item)
            return Option(key=default_key or slugify_option(label), label=label)
        if isinstance(item, dict):
            unknown = sorted(set(item) - {"key", "label"})
            if unknown:
                raise self.fail(
                    f"unknown option field '{unknown[0]}'", path=path, mapping=item, key=unknown[0]
                )
            given_label = item.get("label")
            given_key = item.get("key")
            if given_label is None and given_key is None:
                raise self.fail("an option needs a label or a key", path=path, mapping=item)
            label = str(given_label if given_label is not None else given_key)
            option_key = str(given_key) if given_key is not None else (default_key or slugify_option(label))
            if not KEY_RE.match(option_key):
                raise self.fail(
                    f"option key '{option_key}' must be 1-64 of a-z, 0-9 and _",
                    path=f"{path}.key",
                    mapping=item,
                    key="key",
                )
            return Option(key=option_key, label=label)
        raise self.fail("an option must be text or {key, label}", path=path, mapping=mapping, key=key)

    def question(
        self, raw: Any, index: int, unit: str, earlier: dict[str, Question], parent: Any
    ) -> Question:
        path = f"questions[{index}]"
        if not isinstance(raw, dict):
            raise self.fail("each question must be a mapping", path=path, mapping=parent, key="questions")
        kind = self.string(raw, "kind", path, required=True)
        if kind not in KINDS:
            raise self.fail(
                f"'{kind}' is not one of {', '.join(KINDS)}", path=f"{path}.kind", mapping=raw, key="kind"
            )
        allowed = _COMMON_FIELDS | _KIND_FIELDS[kind]
        for name in raw:
            if name not in allowed:
                if name in _FIELD_KINDS:
                    message = (
                        f"'{name}' applies only to {' and '.join(_FIELD_KINDS[name])} questions, not {kind}"
                    )
                else:
                    message = f"unknown field '{name}'"
                raise self.fail(message, path=f"{path}.{name}", mapping=raw, key=name)
        key = self.string(raw, "key", path, required=True)
        if not KEY_RE.match(key):
            raise self.fail("must be 1-64 of a-z, 0-9 and _", path=f"{path}.key", mapping=raw, key="key")
        if key in earlier:
            raise self.fail(f"question key '{key}' is used twice", path=f"{path}.key", mapping=raw, key="key")
        prompt = self.string(raw, "prompt", path, required=True)
        values: dict[str, Any] = {
            "key": key,
            "kind": kind,
            "prompt": prompt,
            "help": self.string(raw, "help", path, required=False),
            "required": self.boolean(raw, "required", path, True),
            "expert_only": self.boolean(raw, "expert_only", path, False),
        }
        if kind in ("likert", "single", "multi"):
            has_options = "options" in raw
            has_from = "options_from" in raw
            if kind == "likert" and not has_options:
                raise self.fail("'options' is required (the scale points in order)", path=path, mapping=raw)
            if has_options == has_from:
                raise self.fail("give exactly one of 'options' or 'options_from'", path=path, mapping=raw)
            if has_options:
                values["options"] = self.options(raw["options"], f"{path}.options", raw, "options")
                if kind != "multi" and len(values["options"]) < 2:
                    raise self.fail(
                        "needs at least two options", path=f"{path}.options", mapping=raw, key="options"
                    )
            else:
                values["options_from"] = self.string(raw, "options_from", path, required=True)
        if kind == "likert" and raw.get("unsure") is not None:
            values["unsure"] = self.option(
                raw["unsure"], f"{path}.unsure", raw, "unsure", default_key=UNSURE_KEY
            )
        if kind == "multi":
            if raw.get("none_option") is not None:
                values["none_option"] = self.option(
                    raw["none_option"], f"{path}.none_option", raw, "none_option", default_key=NONE_OPTION_KEY
                )
            if "page_size" in raw:
                page_size = raw["page_size"]
                if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
                    raise self.fail(
                        "must be a positive integer", path=f"{path}.page_size", mapping=raw, key="page_size"
                    )
                values["page_size"] = page_size
            values["require_all_shown"] = self.boolean(raw, "require_all_shown", path, False)
        self.check_extra_keys_do_not_clash(values, path, raw)
        if kind == "binary":
            reason = self.string(raw, "reason", path, required=False, default="none")
            if reason not in REASON_MODES:
                raise self.fail(
                    f"'{reason}' is not one of {', '.join(REASON_MODES)}",
                    path=f"{path}.reason",
                    mapping=raw,
                    key="reason",
                )
            values["reason"] = reason
        if kind == "text":
            normaliser = self.string(raw, "normaliser", path, required=False, default="none")
            if normaliser not in NORMALISERS:
                raise self.fail(
                    f"'{normaliser}' is not one of {', '.join(NORMALISERS)}",
                    path=f"{path}.normaliser",
                    mapping=raw,
                    key="normaliser",
                )
            values["normaliser"] = normaliser
        if kind == "boxes":
            if unit == "text":
                raise self.fail(
                    "boxes questions need images; this protocol's unit is text", path=path, mapping=raw
                )
            linked = self.string(raw, "linked_question", path, required=True)
            target = earlier.get(linked)
            if target is None or target.kind != "multi":
                raise self.fail(
                    f"'{linked}' must be the key of an earlier multi question",
                    path=f"{path}.linked_question",
                    mapping=raw,
                    key="linked_question",
                )
            values["linked_question"] = linked
            boxes_required = self.string(raw, "boxes_required", path, required=False, default="none")
            if boxes_required not in BOXES_REQUIRED:
                raise self.fail(
                    f"'{boxes_required}' is not one of {', '.join(BOXES_REQUIRED)}",
                    path=f"{path}.boxes_required",
                    mapping=raw,
                    key="boxes_required",
                )
            values["boxes_required"] = boxes_required
        if raw.get("applies_if") is not None:
            values["applies_if"] = self.applies_if(raw["applies_if"], f"{path}.applies_if", raw)
        if raw.get("show_if") is not None:
            values["show_if"] = self.show_if(raw["show_if"], f"{path}.show_if", raw, earlier)
        return Question(**values)

    def check_extra_keys_do_not_clash(self, values: dict[str, Any], path: str, raw: Any) -> None:
        keys = {option.key for option in values.get("options", ())}
        for extra in ("unsure", "none_option"):
            option = values.get(extra)
            if option is not None and option.key in keys:
                raise self.fail(
                    f"the {extra} key '{option.key}' is also a regular option",
                    path=f"{path}.{extra}",
                    mapping=raw,
                    key=extra,
                )

    def applies_if(self, raw: Any, path: str, parent: Any) -> dict[str, Any]:
        if not isinstance(raw, dict) or set(raw) != {"field", "in"}:
            raise self.fail(
                "must be {field: NAME, in: [VALUES]}", path=path, mapping=parent, key="applies_if"
            )
        values = raw["in"]
        if not isinstance(values, list) or not values:
            raise self.fail("'in' must be a non-empty list", path=f"{path}.in", mapping=raw, key="in")
        return {"field": str(raw["field"]), "in": [str(value) for value in values]}

    def show_if(self, raw: Any, path: str, parent: Any, earlier: dict[str, Question]) -> dict[str, Any]:
        if not isinstance(raw, dict) or set(raw) != {"question", "in"}:
            raise self.fail("must be {question: KEY, in: [VALUES]}", path=path, mapping=parent, key="show_if")
        target = earlier.get(str(raw["question"]))
        if target is None or target.kind not in ("single", "binary", "likert"):
            raise self.fail(
                f"'{raw['question']}' must be an earlier single, binary or likert question",
                path=f"{path}.question",
                mapping=raw,
                key="question",
            )
        values = raw["in"]
        if not isinstance(values, list) or not values:
            raise self.fail("'in' must be a non-empty list", path=f"{path}.in", mapping=raw, key="in")
        values = [str(int(value)) if isinstance(value, bool) else str(value) for value in values]
        if target.kind == "binary":
            allowed = ["0", "1"]
        elif target.options_from is None:
            allowed = [option.key for option in target.options] + (
                [target.unsure.key] if target.unsure else []
            )
        else:
            allowed = []
        for value in values:
            if allowed and value not in allowed:
                raise self.fail(
                    f"'{value}' is not an answer of '{target.key}' ({', '.join(allowed)})",
                    path=f"{path}.in",
                    mapping=raw,
                    key="in",
                )
        return {"question": target.key, "in": values}
