from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg
from annotations.interchange.annotation_import import ALLOWED_FIELDS, REQUIRED_FIELDS
from annotations.interchange.records import jsonl_objects, utf8_text
from annotations.interchange.sources import file_read
from common.errors import WorkbenchError
from metrics.overlap_policy import (
    CONFUSION_KINDS,
    FIT_KINDS,
    Judgement,
    PolicyError,
    PosteriorPolicy,
    ReplaySettings,
    overlap_replay,
    policy_parse,
)

MODEL_OPTIONS = ("gold", "fit", "batches", "confusion", "shrink")


class Command(BaseCommand):
    help = (
        "Replay an overlap policy (fixed:K, agree:K/MAX, posterior:P/MAX) on a JSONL file of annotations in "
        "the import format, in file order: the judgements it would have used and whether each item's "
        "consensus stays the majority of all its judgements (docs/overlap.md). Needs no study."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=file_arg, help="Annotations, one JSON object a line (import format)")
        parser.add_argument("--policy", required=True, help="fixed:K, agree:K/MAX or posterior:P/MAX")
        parser.add_argument("--question", help="The question to replay (needed when the file has several)")
        parser.add_argument("--json", action="store_true", help="Print the whole replay as JSON")
        parser.add_argument(
            "--gold",
            type=file_arg,
            help="posterior: gold items (the controls JSONL: external_id, answers) that train Dawid-Skene",
        )
        parser.add_argument(
            "--fit",
            choices=FIT_KINDS,
            help="posterior: fit on the judgements used so far, batch by batch (used, the default) "
            "or on all of them (all: a leak)",
        )
        parser.add_argument("--batches", type=int, help="posterior --fit used: batches of items (default 10)")
        parser.add_argument(
            "--confusion",
            choices=CONFUSION_KINDS,
            help="posterior: per-annotator rows (full, the default), one accuracy each (one-coin) "
            "or one confusion for all (pooled: anonymous raters)",
        )
        parser.add_argument(
            "--shrink", type=float, help="posterior: pseudo-answers pulling each annotator to the pool (2)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            policy = policy_parse(options["policy"])
        except PolicyError as exc:
            raise CommandError(str(exc)) from exc
        given = [name for name in MODEL_OPTIONS if options[name] is not None]
        if given and not isinstance(policy, PosteriorPolicy):
            raise CommandError(f"--{given[0]} goes with a posterior:P/MAX policy")
        if options["batches"] is not None and options["fit"] == "all":
            raise CommandError("--batches goes with --fit used")
        defaults = ReplaySettings()
        settings = ReplaySettings(
            confusion=options["confusion"] or defaults.confusion,
            fit=options["fit"] or defaults.fit,
            batches=defaults.batches if options["batches"] is None else options["batches"],
            shrink=defaults.shrink if options["shrink"] is None else options["shrink"],
        )
        try:
            settings.check()
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            name, data = file_read(source_arg(options["file"], study=None))
            judgements, question, machine = _judgements(utf8_text(data, name), name, options["question"])
            gold: dict[Hashable, Hashable] = {}
            if options["gold"] is not None:
                gold_name, gold_data = file_read(source_arg(options["gold"], study=None))
                gold = _gold(utf8_text(gold_data, gold_name), gold_name, question)
        except WorkbenchError as exc:
            raise fail(exc) from exc
        result = overlap_replay(judgements, policy, gold=gold, settings=settings)
        report = {"question": question} | result.to_dict()
        report["left_out"] = report["left_out"] | {"machine_judgements": machine}
        if options["json"]:
            self.stdout.write(dump(report))
            return
        share = result.saved_share
        same = result.same_as_full_consensus
        self.stdout.write(
            f"{report['policy']} on {question!r}: {report['items']} items, "
            f"{result.judgements_used} of {result.judgements_available} judgements used"
            + (f" ({share:.1%} saved)" if share is not None else "")
            + (
                f"; same label as the full consensus on {same:.1%} of "
                f"{result.items_with_full_consensus} items"
                if same is not None
                else "; no item has a full consensus"
            )
        )


def _value(value: Any, where: str) -> Hashable:
    """An answer as a class: an option, a number or true/false; a list of them (a multi answer) as
    its sorted tuple."""

    def scalar(part: Any) -> bool:
        return isinstance(part, str | int | float | bool)

    if scalar(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, list) and all(scalar(part) for part in value):
        return tuple(sorted(value, key=lambda part: (type(part).__name__, str(part))))
    raise CommandError(
        f"{where}: value must be an option, a number, true/false or a list of options "
        "(a replay compares whole answers; boxes and empty answers cannot be replayed)"
    )


def _judgements(text: str, name: str, question: str | None) -> tuple[list[Judgement], str, int]:
    """(item, annotator, value) of the human answers to one question, in file order; the question;
    how many machine answers to it were left out."""
    seen: dict[tuple[str, str, str, str, str], int] = {}
    rows: list[tuple[int, dict[str, Any]]] = []
    questions: list[str] = []
    for number, record in jsonl_objects(text, where=f"{name} "):
        missing = [key for key in REQUIRED_FIELDS if key not in record]
        if missing:
            raise CommandError(f"{name} line {number}: '{missing[0]}' is missing")
        unknown = sorted(set(record) - ALLOWED_FIELDS)
        if unknown:
            raise CommandError(f"{name} line {number}: unknown field '{unknown[0]}'")
        kind = record.get("annotator_kind", "human")
        if kind not in ("human", "machine"):
            raise CommandError(f"{name} line {number}: annotator_kind must be 'human' or 'machine'")
        version = str(record.get("annotator_version", "") or "") if kind == "machine" else ""
        key = (str(record["item"]), kind, str(record["annotator"]).strip(), version, str(record["question"]))
        if key in seen:
            raise CommandError(f"{name} line {number}: repeats the answer of line {seen[key]}")
        seen[key] = number
        if key[4] not in questions:
            questions.append(key[4])
        rows.append((number, record))
    if not rows:
        raise CommandError(f"{name}: has no annotations")
    if question is None:
        if len(questions) > 1:
            raise CommandError(
                f"{name} holds answers to {len(questions)} questions ({', '.join(questions)}): "
                "choose one with --question"
            )
        question = questions[0]
    elif question not in questions:
        raise CommandError(f"{name} has no answer to question {question!r} (it has: {', '.join(questions)})")
    judgements: list[Judgement] = []
    machine = 0
    for number, record in rows:
        if str(record["question"]) != question:
            continue
        if record.get("annotator_kind", "human") == "machine":
            machine += 1
            continue
        judgements.append(
            (
                str(record["item"]),
                str(record["annotator"]).strip(),
                _value(record["value"], f"{name} line {number}"),
            )
        )
    return judgements, question, machine


def _gold(text: str, name: str, question: str) -> dict[Hashable, Hashable]:
    """The gold items of a controls JSONL file (docs/crowd.md): ``external_id``, optional ``kind``
    (attention items are not gold: skipped) and the expected answers, as an ``answers`` object or one
    key per question; rows without an answer to ``question`` are skipped."""
    gold: dict[Hashable, Hashable] = {}
    for number, record in jsonl_objects(text, where=f"{name} "):
        if "external_id" not in record:
            raise CommandError(f"{name} line {number}: 'external_id' is missing")
        if record.get("kind", "gold") not in ("gold", "attention"):
            raise CommandError(f"{name} line {number}: kind must be 'gold' or 'attention'")
        if record.get("kind", "gold") == "attention":
            continue
        answers = record.get("answers", record)
        if not isinstance(answers, dict):
            raise CommandError(f"{name} line {number}: answers must be a JSON object")
        if answers.get(question) in (None, ""):
            continue
        gold[str(record["external_id"])] = _value(answers[question], f"{name} line {number}")
    return gold
