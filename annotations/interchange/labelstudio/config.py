"""Label Studio labeling configs (XML) <-> protocols.

``config_to_protocol`` reads a labeling config (untrusted XML: parsed by ``defusedxml``, which refuses
DTDs, entities and external references) into a protocol and a map from each control's ``name`` (the
``from_name`` of its results) to a question:

- ``<Choices choice="single">`` (or ``single-radio``, the default ``single``) -> single,
  ``<Choices choice="multiple">`` -> multi; each ``<Choice value=... alias=...>`` an option whose key is
  its alias (when it is a valid key) or the slug of its value, and whose label is its value;
- ``<Rating maxRating="n">`` -> likert with the points ``1`` .. ``n``;
- ``<TextArea>`` -> text;
- a ``<Choices>`` (or ``<RectangleLabels>``) with ``value="$field"`` and no children takes its choices from
  each task (Label Studio's dynamic choices: ``data.field`` is a list of ``{"value": ..., "alias": ...}``)
  -> a question whose options come from the item's metadata (``options_from``);
- ``<RectangleLabels>`` on the ``<Image>`` -> boxes linked to a multi question with its labels: a
  ``Choices multiple`` with the same options (or the one whose options include them all) when the
  config has one, otherwise a question
  ``<name>_labels`` whose answer is the labels drawn (see docs/import-export.md);
- ``<View>``, ``<Header>`` (its text becomes the next control's prompt) and ``<Style>`` shape the page;
  the ``<Image>`` (an image study; with ``valueList="$field"``, several images per task: an image-set
  study, whose rectangles say their image in ``item_index``) or ``<Text>`` (a text study) the controls
  point to is the object
  (other ``<Text>`` tags, such as a caption, are only shown); every other tag is refused by name
  with its line.

``protocol_to_config`` writes the config of a study's protocol for the Label Studio export, and keeps
the whole protocol in a comment (``<!-- workbench-protocol {...} -->``) so that an import of that config
restores it exactly (binary and likert questions, option labels, conditions); the comment is used only
while every control of the config still matches a question of it. An image-set study is written as one
``<Image valueList="$images">``, and a question whose options come from each item's metadata as a
dynamic ``<Choices value="$options_KEY">`` (``options_field``), the export writing each task's options.
"""

from __future__ import annotations

import json
import re
import xml.sax
import xml.sax.handler
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import quoteattr

from defusedxml import DefusedXmlException
from defusedxml.sax import parseString

from common.checked_input import MAX_JSON_DEPTH, InputRefused, json_loads
from protocols.schema import (
    KEY_RE,
    Option,
    Protocol,
    ProtocolError,
    Question,
    protocol_from_dict,
    slugify_option,
)

CONTROL_TAGS = {
    "Choices": "choices",
    "Rating": "rating",
    "TextArea": "textarea",
    "RectangleLabels": "rectanglelabels",
}
OBJECT_TAGS = {"Image": "image", "Text": "text"}
LAYOUT_TAGS = {"View", "Header", "Style"}
CHILD_TAGS = {"Choice": "Choices", "Label": "RectangleLabels"}
SUPPORTED = "View, Header, Style, Image, Text, Choices/Choice, Rating, TextArea, RectangleLabels/Label"
# Which question kinds a result type can fill.
RESULT_KINDS = {
    "choices": ("single", "multi", "likert", "binary"),
    "rating": ("likert",),
    "textarea": ("text",),
    "rectanglelabels": ("boxes",),
}
IMAGES_FIELD = "images"  # the task data field of an image set's images (``<Image valueList="$images">``)
FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
OPTIONS_PREFIX = "options_"  # the task data field of a question's options from the item (``$options_KEY``)
COMMENT_RE = re.compile(r"<!--\s*workbench-protocol\s+(.*?)\s*-->", re.DOTALL)
MAX_CONFIG_BYTES = 1024 * 1024
MAX_CONFIG_DEPTH = MAX_JSON_DEPTH  # tags inside tags; deeper configs are refused (the walk recurses)
MAX_RATING = 100
BINARY_CHOICES = (("Yes", "1"), ("No", "0"))
# A question kind read from the config -> the kinds a kept protocol may have there.
_COMPATIBLE = {
    "single": ("single", "likert", "binary"),
    "multi": ("multi",),
    "likert": ("likert",),
    "text": ("text",),
    "boxes": ("boxes",),
}


class ConfigError(ValueError):
    """A labeling config that cannot become a protocol; says the line and the tag."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.message = f"line {line}: {message}" if line is not None else message
        super().__init__(self.message)


@dataclass(frozen=True)
class Control:
    """How the results of one control (its ``from_name``) fill a question."""

    from_name: str
    question_key: str
    result_type: str  # choices | rating | textarea | rectanglelabels
    values: dict[str, str] = field(default_factory=dict)  # a choice or label as written -> option key
    derived_multi: str | None = None  # boxes: the multi question that holds the labels drawn
    options_field: str | None = None  # dynamic choices: the task data field that lists them


@dataclass(frozen=True)
class LabelStudioConfig:
    protocol: Protocol
    object_name: str  # the object tag's name (``to_name`` of results)
    data_field: str  # the task data field the object shows (``$image`` -> ``image``)
    controls: dict[str, Control]
    restored: bool = False  # the protocol came back from the workbench comment

    @property
    def options_fields(self) -> set[str]:
        """The task data fields that list dynamic choices (not item metadata as such)."""
        return {c.options_field for c in self.controls.values() if c.options_field is not None}


@dataclass
class _Element:
    tag: str
    attrs: dict[str, str]
    line: int
    children: list[_Element] = field(default_factory=list)


class _TreeHandler(xml.sax.handler.ContentHandler):
    def __init__(self) -> None:
        super().__init__()
        self.root: _Element | None = None
        self.stack: list[_Element] = []
        self.locator: Any = None

    def setDocumentLocator(self, locator: Any) -> None:  # SAX's name
        self.locator = locator

    def startElement(self, name: str, attrs: Any) -> None:  # SAX's name
        line = self.locator.getLineNumber() if self.locator is not None else 0
        if len(self.stack) >= MAX_CONFIG_DEPTH:
            raise ConfigError(f"tags are nested more than {MAX_CONFIG_DEPTH} levels deep", line=line)
        element = _Element(tag=name, attrs={key: attrs[key] for key in attrs.getNames()}, line=line)
        if self.stack:
            self.stack[-1].children.append(element)
        else:
            self.root = element
        self.stack.append(element)

    def endElement(self, name: str) -> None:  # SAX's name
        self.stack.pop()


def _parse(text: str) -> _Element:
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the labeling config is larger than {MAX_CONFIG_BYTES // 1024} KB")
    handler = _TreeHandler()
    try:
        parseString(
            text.encode("utf-8"), handler, forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
    except DefusedXmlException as exc:
        raise ConfigError(
            f"refused: the config declares a DTD, an entity or an external reference ({exc})"
        ) from exc
    except xml.sax.SAXParseException as exc:
        raise ConfigError(f"not well-formed XML ({exc.getMessage()})", line=exc.getLineNumber()) from exc
    if handler.root is None:
        raise ConfigError("the labeling config is empty")
    if handler.root.tag != "View":
        raise ConfigError(
            f"the config must start with <View>, not <{handler.root.tag}>", line=handler.root.line
        )
    return handler.root


def _walk(element: _Element) -> list[_Element]:
    found = [element]
    if element.tag in CONTROL_TAGS or element.tag == "Style":
        return found  # a control's children are checked with it; a style's are CSS
    for child in element.children:
        found.extend(_walk(child))
    return found


def _key(name: str, line: int, used: set[str]) -> str:
    key = name if KEY_RE.match(name) else slugify_option(name)
    if key in used:
        raise ConfigError(f"the control name {name!r} gives the question key {key!r} twice", line=line)
    used.add(key)
    return key


def _options(element: _Element, child_tag: str) -> tuple[tuple[Option, ...], dict[str, str]]:
    options: list[Option] = []
    values: dict[str, str] = {}
    for child in element.children:
        if child.tag != child_tag:
            raise ConfigError(
                f"<{child.tag}> inside <{element.tag}> is not supported (only <{child_tag}>)", line=child.line
            )
        value = child.attrs.get("value", "").strip()
        if not value:
            raise ConfigError(f"<{child_tag}> needs a value", line=child.line)
        alias = child.attrs.get("alias", "").strip()
        key = alias if alias and KEY_RE.match(alias) else slugify_option(alias or value)
        if any(option.key == key for option in options):
            raise ConfigError(
                f"<{child_tag} value={value!r}> gives the option key {key!r} twice", line=child.line
            )
        options.append(Option(key=key, label=value))
        values[value] = key
        if alias:
            values[alias] = key
    if not options:
        raise ConfigError(
            f"<{element.tag} name={element.attrs.get('name', '')!r}> has no <{child_tag}>", line=element.line
        )
    return tuple(options), values


def _dynamic(element: _Element) -> str | None:
    """The task data field a control takes its choices from (``value="$field"``, no children), or None."""
    raw = element.attrs.get("value", "").strip()
    if not raw:
        return None
    if element.children:
        raise ConfigError(
            f"<{element.tag} value={raw!r}> takes its choices from the task; it cannot also list them",
            line=element.line,
        )
    if not raw.startswith("$") or not FIELD_RE.match(raw[1:]):
        raise ConfigError(
            f'<{element.tag} value={raw!r}> must name a task field ("$field")', line=element.line
        )
    return raw[1:]


_Box = tuple[_Element, str, str, tuple[Option, ...], dict[str, str], str | None]


def _elements(root: _Element) -> tuple[list[_Element], list[tuple[_Element, str]]]:
    """The config's objects (Image, Text) and its controls with the prompt a Header above each gives;
    a tag out of place or not supported is refused with its line."""
    objects: list[_Element] = []
    controls: list[tuple[_Element, str]] = []  # element, prompt
    prompt = ""
    for element in _walk(root):
        if element.tag in CHILD_TAGS:
            raise ConfigError(
                f"<{element.tag}> belongs inside <{CHILD_TAGS[element.tag]}>", line=element.line
            )
        if element.tag in LAYOUT_TAGS:
            header = element.attrs.get("value", "").strip()
            if element.tag == "Header" and header and not header.startswith("$"):
                prompt = header
            continue
        if element.tag in OBJECT_TAGS:
            if "valueList" in element.attrs and (element.tag != "Image" or "value" in element.attrs):
                raise ConfigError(
                    f"<{element.tag}> takes value or, on an <Image>, valueList (several images per task)",
                    line=element.line,
                )
            objects.append(element)
            continue
        if element.tag in CONTROL_TAGS:
            controls.append((element, prompt))
            prompt = ""
            continue
        raise ConfigError(f"<{element.tag}> is not supported (supported: {SUPPORTED})", line=element.line)
    return objects, controls


def _labelled_object(
    root: _Element, objects: list[_Element], controls: list[tuple[_Element, str]]
) -> tuple[_Element, str, str, str]:
    """The one object every control labels: (element, its name, its ``$field`` value, the unit)."""
    images = [element for element in objects if element.tag == "Image"]
    if len(images) > 1:
        raise ConfigError("a second <Image>: one image per task is labelled", line=images[1].line)
    if not controls:
        raise ConfigError("the config has no Choices, Rating, TextArea or RectangleLabels", line=root.line)
    targets = sorted({element.attrs.get("toName", "").strip() for element, _prompt in controls})
    if len(targets) != 1:
        raise ConfigError(
            f"the controls point to several objects ({', '.join(repr(t) for t in targets)}); one is labelled",
            line=controls[0][0].line,
        )
    named = [element for element in objects if element.attrs.get("name", "").strip() == targets[0]]
    if not named:
        raise ConfigError(
            f"the controls point to {targets[0]!r}, which is no <Image> or <Text> of the config",
            line=controls[0][0].line,
        )
    obj = named[0]  # other <Text> objects (a caption shown beside the image) are display only
    object_name = obj.attrs.get("name", "").strip()
    value = obj.attrs.get("value", obj.attrs.get("valueList", "")).strip()
    if not object_name or not value.startswith("$") or len(value) < 2:
        raise ConfigError(f'<{obj.tag}> needs a name and a value="$field"', line=obj.line)
    unit = "image_set" if "valueList" in obj.attrs else OBJECT_TAGS[obj.tag]
    return obj, object_name, value, unit


def _control_question(
    element: _Element,
    prompt: str,
    *,
    object_name: str,
    unit: str,
    used: set[str],
    questions: list[Question],
    boxes: list[_Box],
    mapped: dict[str, Control],
) -> None:
    """The question of one Choices, Rating or TextArea control (its boxes, for RectangleLabels, are
    made once every control is read: they may link to a Choices question)."""
    control_name = element.attrs.get("name", "").strip()
    if not control_name:
        raise ConfigError(f"<{element.tag}> needs a name", line=element.line)
    if control_name in mapped or any(control_name == b[0].attrs.get("name") for b in boxes):
        raise ConfigError(f"two controls are named {control_name!r}", line=element.line)
    to_name = element.attrs.get("toName", "").strip()
    if to_name != object_name:
        raise ConfigError(
            f"<{element.tag} name={control_name!r}> points to {to_name!r}; the object is {object_name!r}",
            line=element.line,
        )
    key = _key(control_name, element.line, used)
    required = element.attrs.get("required", "false").strip().lower() == "true"
    common: dict[str, Any] = {"key": key, "prompt": prompt or control_name, "required": required}
    if element.tag == "Choices":
        dynamic = _dynamic(element)
        options, values = ((), {}) if dynamic else _options(element, "Choice")
        mode = element.attrs.get("choice", "single").strip()
        if mode not in ("single", "single-radio", "multiple"):
            raise ConfigError(f"choice={mode!r} is not single, single-radio or multiple", line=element.line)
        kind = "multi" if mode == "multiple" else "single"
        if kind == "single" and not dynamic and len(options) < 2:
            raise ConfigError(
                f"<Choices name={control_name!r}> needs at least two choices", line=element.line
            )
        questions.append(Question(kind=kind, options=options, options_from=dynamic, **common))
        mapped[control_name] = Control(control_name, key, "choices", values, options_field=dynamic)
    elif element.tag == "Rating":
        if element.children:
            raise ConfigError(
                f"<{element.children[0].tag}> inside <Rating> is not supported", line=element.line
            )
        raw = element.attrs.get("maxRating", "5").strip()
        if not raw.isdigit() or not 2 <= int(raw) <= MAX_RATING:
            raise ConfigError(
                f"maxRating={raw!r} must be a whole number from 2 to {MAX_RATING}", line=element.line
            )
        points = tuple(Option(key=str(n), label=str(n)) for n in range(1, int(raw) + 1))
        questions.append(Question(kind="likert", options=points, **common))
        mapped[control_name] = Control(control_name, key, "rating")
    elif element.tag == "TextArea":
        if element.children:
            raise ConfigError(
                f"<{element.children[0].tag}> inside <TextArea> is not supported", line=element.line
            )
        questions.append(Question(kind="text", **common))
        mapped[control_name] = Control(control_name, key, "textarea")
    else:
        if unit == "text":
            raise ConfigError("<RectangleLabels> needs an <Image>", line=element.line)
        dynamic = _dynamic(element)
        options, values = ((), {}) if dynamic else _options(element, "Label")
        boxes.append((element, key, prompt or control_name, options, values, dynamic))


def _box_questions(
    boxes: list[_Box], *, used: set[str], questions: list[Question], mapped: dict[str, Control]
) -> None:
    """Each RectangleLabels' boxes question, linked to the multi question with the same labels (or
    the narrowest wider one), else to a new question of the labels drawn."""
    for element, key, prompt, options, values, dynamic in boxes:
        keys = {option.key for option in options}
        if dynamic:
            same = [q for q in questions if q.kind == "multi" and q.options_from == dynamic]
            wider = []
        else:
            same = [
                q
                for q in questions
                if q.kind == "multi" and not q.options_from and {o.key for o in q.options} == keys
            ]
            wider = [
                q
                for q in questions
                if q.kind == "multi" and not q.options_from and {o.key for o in q.options} >= keys
            ]
        derived = None
        if len(same) == 1 or (not same and len(wider) == 1):
            linked = (same or wider)[0].key
        else:
            linked = f"{key}_labels"
            if linked in used:
                raise ConfigError(
                    f"the question key {linked!r} (for the labels drawn) is taken", line=element.line
                )
            used.add(linked)
            derived = linked
            questions.append(
                Question(
                    key=linked,
                    kind="multi",
                    prompt=f"Which of these are marked in the image? ({key})",
                    required=False,
                    options=options,
                    options_from=dynamic,
                )
            )
        questions.append(
            Question(key=key, kind="boxes", prompt=prompt, required=False, linked_question=linked)
        )
        name_attr = element.attrs["name"].strip()
        mapped[name_attr] = Control(name_attr, key, "rectanglelabels", values, derived, dynamic)


def config_to_protocol(text: str, *, name: str) -> LabelStudioConfig:
    """The protocol a labeling config describes (see the module docstring); refusals name the line."""
    root = _parse(text)
    objects, controls = _elements(root)
    _obj, object_name, value, unit = _labelled_object(root, objects, controls)
    used: set[str] = set()
    questions: list[Question] = []
    boxes: list[_Box] = []
    mapped: dict[str, Control] = {}
    for element, prompt in controls:
        _control_question(
            element,
            prompt,
            object_name=object_name,
            unit=unit,
            used=used,
            questions=questions,
            boxes=boxes,
            mapped=mapped,
        )
    _box_questions(boxes, used=used, questions=questions, mapped=mapped)
    protocol_dict = {
        "name": name[:200] or "Label Studio project",
        "unit": unit,
        "questions": [question.to_dict() for question in questions],
    }
    try:
        protocol = protocol_from_dict(protocol_dict, source="labeling config")
    except ProtocolError as exc:
        raise ConfigError(str(exc)) from exc
    config = LabelStudioConfig(protocol, object_name, value[1:], mapped)
    return _restored(text, config) or config


def _restored(text: str, config: LabelStudioConfig) -> LabelStudioConfig | None:
    """The config with the protocol its workbench comment keeps, when every control still fits it."""
    match = COMMENT_RE.search(text)
    if match is None:
        return None
    try:
        protocol = protocol_from_dict(json_loads(match.group(1)), source="workbench-protocol comment")
    except (InputRefused, ProtocolError):
        return None
    if protocol.unit != config.protocol.unit:
        return None
    controls: dict[str, Control] = {}
    for name, control in config.controls.items():
        if not protocol.has_question(name):
            return None
        question = protocol.question(name)
        derived = config.protocol.question(control.question_key)
        if question.kind not in _COMPATIBLE[derived.kind]:
            return None
        from_item = (
            protocol.question(question.linked_question).options_from
            if control.result_type == "rectanglelabels" and question.linked_question
            else question.options_from
        )
        if (from_item is not None) != (control.options_field is not None):
            return None
        if control.result_type == "rectanglelabels":
            assert question.linked_question is not None
            allowed = {option.key for option in protocol.question(question.linked_question).options}
        elif question.kind == "binary":
            allowed = {"0", "1"}
        else:
            allowed = set(question.choice_keys({}))
        if not set(control.values.values()) <= allowed:
            return None
        if control.result_type == "rating" and len(question.options) != len(derived.options):
            return None
        controls[name] = Control(
            name, name, control.result_type, control.values, options_field=control.options_field
        )
    if not controls:
        return None
    return LabelStudioConfig(protocol, config.object_name, config.data_field, controls, restored=True)


def controls_for_study(protocol: Protocol, from_names: dict[str, str]) -> dict[str, Control]:
    """Map an export's ``from_name``s (with the result type each was seen with) onto a study's
    questions: by the same key, else by its slug; refused by name when a name fits no question."""
    controls: dict[str, Control] = {}
    for from_name, result_type in from_names.items():
        key = from_name if protocol.has_question(from_name) else slugify_option(from_name)
        if not protocol.has_question(key):
            raise ConfigError(
                f"from_name {from_name!r} matches no question of the study "
                f"(questions: {', '.join(q.key for q in protocol.questions)})"
            )
        question = protocol.question(key)
        if result_type in RESULT_KINDS and question.kind not in RESULT_KINDS[result_type]:
            raise ConfigError(
                f"from_name {from_name!r} holds {result_type} results; question {key!r} is {question.kind}"
            )
        controls[from_name] = Control(from_name, key, result_type)
    return controls


def option_lookup(question: Question, control: Control | None, metadata: dict[str, Any]) -> dict[str, str]:
    """Every way an export may write an option of ``question`` -> its key: the config's values and
    aliases, the option keys, labels and the slugs of labels."""
    lookup: dict[str, str] = {}
    options = question.options_for(metadata)
    extra = [o for o in (question.unsure, question.none_option) if o is not None]
    for option in (*options, *extra):
        lookup.setdefault(slugify_option(option.label), option.key)
        lookup.setdefault(option.label, option.key)
        lookup[option.key] = option.key
    if control is not None:
        lookup.update(control.values)
    return lookup


# --- Writing a config ---------------------------------------------------------------------------------


def _comment(protocol: Protocol) -> str:
    text = json.dumps(protocol.to_dict(), ensure_ascii=True, separators=(",", ":"))
    # "--" cannot stand in an XML comment; in JSON it can only occur inside a string, where \u002d is "-".
    return "<!-- workbench-protocol " + text.replace("--", "-\\u002d") + " -->"


def _rating_scale(question: Question) -> bool:
    """A likert whose points are 1..n (and no unsure) is a Label Studio Rating without loss."""
    return question.unsure is None and [o.key for o in question.options] == [
        str(n) for n in range(1, len(question.options) + 1)
    ]


def likert_as_rating(question: Question) -> bool:
    return question.kind == "likert" and _rating_scale(question)


def options_field(question: Question) -> str:
    """The task data field that lists a question's options from the item (``value="$options_KEY"``)."""
    return f"{OPTIONS_PREFIX}{question.key}"


def task_options(question: Question, metadata: dict[str, Any]) -> list[dict[str, str]]:
    """Dynamic choices of one task for a question whose options come from the item: Unsure or None of
    the above after the item's options, each ``{"value": label, "alias": key}``."""
    options = list(question.options_for(metadata))
    options += [o for o in (question.unsure, question.none_option) if o is not None]
    return [{"value": option.label, "alias": option.key} for option in options]


def protocol_to_config(protocol: Protocol) -> str:
    """The labeling config of a protocol (see the module docstring); object ``image`` or ``text``.
    Every protocol has one (image sets through ``valueList``, options from the item through dynamic
    choices)."""
    obj = "text" if protocol.unit == "text" else "image"
    lines = ["<View>", "  " + _comment(protocol)]
    if protocol.unit == "image_set":
        lines.append(f'  <Image name="{obj}" valueList="${IMAGES_FIELD}"/>')
    else:
        lines.append(f'  <{"Image" if obj == "image" else "Text"} name="{obj}" value="${obj}"/>')
    for question in protocol.questions:
        lines.append(f"  <Header value={quoteattr(question.prompt)}/>")
        head = f'name={quoteattr(question.key)} toName="{obj}"'
        required = ' required="true"' if question.required and question.kind != "boxes" else ""
        if question.kind == "text":
            lines.append(f'  <TextArea {head} maxSubmissions="1" editable="true"{required}/>')
            continue
        if question.kind == "likert" and _rating_scale(question):
            lines.append(f'  <Rating {head} maxRating="{len(question.options)}"{required}/>')
            continue
        if question.kind == "boxes":
            assert question.linked_question is not None
            linked = protocol.question(question.linked_question)
            if linked.options_from is not None:
                lines.append(f'  <RectangleLabels {head} value="${options_field(linked)}"/>')
                continue
            options = linked.options
            lines.append(f"  <RectangleLabels {head}>")
            lines.extend(f"    <Label value={quoteattr(o.label)} alias={quoteattr(o.key)}/>" for o in options)
            lines.append("  </RectangleLabels>")
            continue
        if question.kind == "binary":
            choices = [Option(key=key, label=label) for label, key in BINARY_CHOICES]
            mode = "single"
        else:
            choices = list(question.options)
            choices += [o for o in (question.unsure, question.none_option) if o is not None]
            mode = {"single": "single", "likert": "single-radio", "multi": "multiple"}[question.kind]
        if question.options_from is not None:
            lines.append(f'  <Choices {head} choice="{mode}" value="${options_field(question)}"{required}/>')
            continue
        lines.append(f'  <Choices {head} choice="{mode}"{required}>')
        lines.extend(f"    <Choice value={quoteattr(o.label)} alias={quoteattr(o.key)}/>" for o in choices)
        lines.append("  </Choices>")
    lines.append("</View>")
    return "\n".join(lines) + "\n"
