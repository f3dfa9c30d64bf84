"""Handing out items to human annotators: claim, submit, skip, release, expire.

The rule is explained in ``assignment.md`` beside this file. In short: each item needs
``study.overlap`` distinct humans, or fewer when the study's overlap policy stops it early (``agree``,
``posterior``: the item's ``policy_slots``, kept by the submit); an annotator never judges the same
item twice (the ``assignment_unique`` constraint); a claim is a lease of ``study.lease_minutes`` and an
expired lease frees its slot; expert-only items go to the study's expert pool only; the next item is the
one with the fewest completed judgements, ties broken by a pseudo-random order fixed per annotator.
Under a study's rater-pool quotas an item also takes at most its quota of judgements from each pool
(``selectors/pool_quotas.py``).

Concurrency: a claim is one transaction. On PostgreSQL the candidate item row is locked with
``SELECT ... FOR UPDATE SKIP LOCKED`` (two claims never wait on, or both take, the same item) and
the item's occupancy is counted again under that lock before the lease is written, so a count read
from an older snapshot can never over-fill it. On SQLite the transaction is ``IMMEDIATE``
(settings), which serialises writers, so the same code is safe there too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.access import annotator_studies, own_assignments
from annotations.locks import item_lock, item_lock_or_none
from annotations.models import (
    Annotation,
    Annotator,
    Assignment,
    AssignmentDraft,
    Enrollment,
    Item,
    Pool,
    Study,
    User,
    ValidationSample,
    ValidationSampleItem,
)
from annotations.selectors.controls import control_candidate, control_plan
from annotations.selectors.counted import active_exclusions
from annotations.selectors.overlap import (
    item_policy_state,
    policy_opening,
    policy_question,
    study_policy,
    votes_with,
)
from annotations.selectors.pool_quotas import (
    NO_POOL,
    ClaimPool,
    PoolNotCollected,
    claim_pool,
    late_submit_pool,
    pool_recount_sql,
)
from annotations.selectors.pools import attributes_in_study, is_expert_in, sees_expert_questions
from annotations.services.annotation_writes import AnswerToSave, annotations_save, item_context
from annotations.services.drafts import drafts_drop
from annotations.services.submit_writes import assignment_mark_submitted, item_count_judgement
from common.errors import Conflict, NotAllowed, NotFoundError, QuotaReached, ValidationFailed
from common.prepared_query import PreparedQuery
from common.statement_cursor import statement_cursor
from metrics.overlap_policy import FixedPolicy
from protocols.answers import ItemContext, clean_submission

MAX_SKIP_REASON = 500
CLAIM_ATTEMPTS = 20

Status = Assignment.Status


def annotator_seed(*, study_id: int, annotator_id: int) -> int:
    """Where one annotator starts on the study's item ring (stable across runs and machines)."""
    digest = hashlib.sha256(f"{study_id}:{annotator_id}".encode()).hexdigest()
    return int(digest[:8], 16) % 2**31


def _active_lease(now: Any) -> Q:
    return Q(status=Status.LEASED, lease_expires_at__gt=now)


def _occupying(now: Any) -> Q:
    """Assignments that hold one of an item's ``overlap`` slots: submitted, or leased and not expired."""
    return Q(status=Status.SUBMITTED) | _active_lease(now)


def _count_subquery(filter_q: Q) -> Coalesce:
    counts = (
        Assignment.objects.filter(filter_q, item=OuterRef("pk"))
        .order_by()
        .values("item")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))


def _candidates(
    *,
    study: Study,
    annotator: Annotator,
    expert: bool,
    now: Any,
    level: int,
    seed: int,
    wrapped: bool,
    given_back: bool,
    opening: int,
    exclude: Iterable[int] = (),
    pool: ClaimPool = NO_POOL,
) -> QuerySet[Item]:
    """One stretch of the claim order: items with ``level`` judgements, in ring order from ``seed``.

    ``wrapped`` False: shuffle keys from the seed up; True: those below it (the ring wraps around).
    ``given_back`` False: items this annotator never had; True: also those they released or let expire.
    ``expert``: the annotator is of the expert pool in this study (expert-only items are theirs too).
    ``opening``: the slots of an item whose ``policy_slots`` is empty (``overlap.policy_opening``: the
    overlap under ``fixed:K``). An item holds at most its slots of submitted and live leased judgements,
    and, under a pool quota (``pool.quota``), at most that many of them from the annotator's pool.
    The ``item_claim_order`` index (study, policy_stopped, judgements, shuffle_key) serves this as a range
    scan that stops at the first item passing the filters, however large the study; items an overlap
    policy stopped are out of the range.
    """
    mine = Assignment.objects.filter(item=OuterRef("pk"), annotator=annotator)
    if given_back:
        mine = mine.filter(Q(status__in=[Status.SUBMITTED, Status.SKIPPED]) | _active_lease(now))
    items = Item.objects.filter(  # controls: control_candidate
        study=study, policy_stopped=False, judgements=level, control_kind=""
    )
    items = items.filter(shuffle_key__lt=seed) if wrapped else items.filter(shuffle_key__gte=seed)
    if not expert:
        items = items.filter(expert_only=False)
    # Humans validate a labeller on a drawn sample only (services/validation_sample.py): while the study
    # has a sample, only its items (two EXISTS in the same query; without a sample the first is true).
    items = items.filter(
        ~Exists(ValidationSample.objects.filter(study_id=study.pk))
        | Exists(ValidationSampleItem.objects.filter(sample_id=study.pk, item=OuterRef("pk")))
    )
    excluded = list(exclude)
    if excluded:
        items = items.exclude(pk__in=excluded)
    items = (
        # An excluded annotator is given nothing (one EXISTS in the same query, no extra round trip).
        items.filter(~Exists(mine), ~Exists(active_exclusions(study).filter(annotator=annotator)))
        .alias(occupied=_count_subquery(_occupying(now)))
        .filter(occupied__lt=Coalesce(F("policy_slots"), Value(opening)))
    )
    if pool.quota is not None:  # the study's rater-pool quotas (selectors/pool_quotas.py)
        items = items.alias(pool_occupied=_count_subquery(_occupying(now) & Q(rater_pool=pool.value))).filter(
            pool_occupied__lt=pool.quota
        )
    return items.order_by("shuffle_key", "id")


def slots_of(item: Item, opening: int) -> int:
    """The judgements (submitted or leased) ``item`` may hold now: its ``policy_slots``, else ``opening``."""
    return item.policy_slots if item.policy_slots is not None else opening


def _prepared_candidates(
    *, expert: bool, wrapped: bool, given_back: bool, pooled: bool
) -> PreparedQuery[Item]:
    """``_candidates(...).select_for_update(skip_locked=True, of=("self",)).first()`` with nothing
    excluded, compiled once per process and database (common/prepared_query.py). ``pooled``: under a
    rater-pool quota (the pool and its quota are values too)."""

    def build(
        *,
        study: int,
        annotator: int,
        opening: int,
        level: int,
        seed: int,
        now: Any,
        pool_quota: int | None = None,
        rater_pool: str = "",
    ) -> QuerySet[Item]:
        return _candidates(
            study=Study(pk=study),
            annotator=Annotator(pk=annotator),
            expert=expert,
            now=now,
            level=level,
            seed=seed,
            wrapped=wrapped,
            given_back=given_back,
            opening=opening,
            pool=ClaimPool(value=rater_pool, quota=pool_quota) if pooled else NO_POOL,
        ).select_for_update(skip_locked=True, of=("self",))[:1]

    names = ("study", "annotator", "opening", "level", "seed")
    if pooled:
        return PreparedQuery(build, (*names, "pool_quota"), ("now",), ("rater_pool",))
    return PreparedQuery(build, names, ("now",))


_CANDIDATE = {
    (expert, wrapped, given_back, pooled): _prepared_candidates(
        expert=expert, wrapped=wrapped, given_back=given_back, pooled=pooled
    )
    for expert in (False, True)
    for wrapped in (False, True)
    for given_back in (False, True)
    for pooled in (False, True)
}


def _passes(study: Study) -> list[tuple[bool, int, bool]]:
    """(given_back, level, wrapped) in claim order: see assignment.md, "Order"."""
    return [
        (given_back, level, wrapped)
        for given_back in (False, True)
        for level in range(study.overlap)
        for wrapped in (False, True)
    ]


def claim_order(*, study: Study, annotator: Annotator, now: Any = None) -> list[int]:
    """Every item id this annotator may be given now, in the order claims take them (for tests and docs)."""
    now = now or timezone.now()
    seed = annotator_seed(study_id=study.pk, annotator_id=annotator.pk)
    expert = is_expert_in(study_id=study.pk, annotator=annotator)
    opening = policy_opening(study)
    pool = claim_pool(study, attributes_in_study(study.pk, [annotator.pk]).get(annotator.pk))
    order: list[int] = []
    for given_back, level, wrapped in _passes(study):
        order += [
            pk
            for pk in _candidates(
                study=study,
                annotator=annotator,
                expert=expert,
                now=now,
                level=level,
                seed=seed,
                wrapped=wrapped,
                given_back=given_back,
                opening=opening,
                pool=pool,
            ).values_list("pk", flat=True)
            if pk not in order
        ]
    return order


def _check_claimable(study: Study, annotator: Annotator) -> None:
    """Refuse a claim by someone without an account, or in a study that hands out nothing now."""
    if annotator.kind != Annotator.Kind.HUMAN or annotator.user_id is None:
        raise NotAllowed("only people with an account are given items")
    if study.status == Study.Status.DRAFT:
        raise Conflict("the study is not open yet: the researchers have not launched it")
    if study.status != Study.Status.ACTIVE:
        raise Conflict(f"the study is {study.get_status_display().lower()}; no new items are handed out")


def _check_can_claim(study: Study, annotator: Annotator) -> tuple[int | None, bool, Any]:
    """Refuse a claim that may not happen; return the annotator's quota of items (invitations) or None,
    whether they are of the expert pool in this study (their enrolment's pool), and the attributes they
    gave it (their rater pool: ``_pool_or_refusal``)."""
    _check_claimable(study, annotator)
    # One query: the enrolment, and the quota of the invitation the account joined through (if any).
    enrolled = (
        Enrollment.objects.filter(study=study, user_id=cast(int, annotator.user_id))  # checked above
        .values_list("id", "user__participant__invitation__items_per_participant", "pool", "attributes")
        .first()
    )
    if enrolled is None:
        raise NotAllowed("you are not enrolled in this study")
    return enrolled[1], enrolled[2] == Pool.EXPERT, enrolled[3]


def _pool_or_refusal(study: Study, attributes: Any) -> tuple[ClaimPool, PoolNotCollected | None]:
    """The claimant's rater pool, or the refusal ``claim_pool`` gives, kept for after the held-lease
    lookup: someone holding a lease when quotas leave out their pool still gets that item back."""
    try:
        return claim_pool(study, attributes), None
    except PoolNotCollected as refusal:
        return NO_POOL, refusal


def _check_quota(*, study: Study, annotator: Annotator, quota: int, now: Any) -> None:
    """A participant with a quota gets no new lease once submitted items plus live leases reach it."""
    if Assignment.objects.filter(_occupying(now), study=study, annotator=annotator).count() >= quota:
        raise QuotaReached(f"you have done the {quota} items this study asks of you")


@transaction.atomic
def assignment_claim_next(
    *, study: Study, annotator: Annotator, exclude: Iterable[int] = (), now: Any = None
) -> Assignment | None:
    """The annotator's next item as a lease, or None when nothing is left for them.

    An unexpired lease the annotator already holds in this study (other than the assignment ids in
    ``exclude``) is returned first, with its lease renewed; otherwise a new item is leased. The
    task page passes the shown assignment in ``exclude`` to lease one item ahead, whose image it
    prefetches. Locks: the candidate item row (PostgreSQL), then a recount under the lock.
    """
    now = now or timezone.now()
    quota, expert, attributes = _check_can_claim(study, annotator)
    pool, refusal = _pool_or_refusal(study, attributes)
    return _claim(
        study=study,
        annotator=annotator,
        exclude=exclude,
        now=now,
        quota=quota,
        expert=expert,
        opening=policy_opening(study),
        pool=pool,
        refusal=refusal,
    )


@dataclass(frozen=True)
class _ClaimStart:
    study: Study
    quota: int | None
    expert: bool
    holds_lease: bool
    opening: int
    attributes: dict[str, Any] | None


def _claim_start_query(*, study: int, user: int, annotator: int, now: Any) -> QuerySet[Study]:
    return (
        annotator_studies(user_id=user)  # the access rule of the pages (annotations/access.py)
        .filter(pk=study)
        .select_related("quality")
        # A posterior policy's model is the submit's; the claim reads only the opening it implies.
        .defer("overlap_model")
        .annotate(
            claim_opening=KT("overlap_model__opening"),
            # The enrolment joined by the filter above (one per study and account).
            claim_pool=F("enrollments__pool"),
            # What the enrolment's person gave this study: their rater pool (selectors/pool_quotas.py).
            claim_attributes=F("enrollments__attributes"),
            claim_quota=F("enrollments__user__participant__invitation__items_per_participant"),
            claim_holds=Exists(
                Assignment.objects.filter(_active_lease(now), study=OuterRef("pk"), annotator_id=annotator)
            ),
        )
        .order_by("pk")[:1]
    )


# Compiled once per process and database (common/prepared_query.py).
_CLAIM_START = PreparedQuery(_claim_start_query, ("study", "user", "annotator"), ("now",))


def _claim_start(*, user: User, study_id: int, annotator: Annotator, now: Any) -> _ClaimStart:
    """The study as ``access.study_get_for_annotator`` finds it (enrolled; a participant only in its own
    study; with its quality settings), with the enrolment's pool, attributes (the rater pool) and quota and
    whether the annotator holds a live lease there: one query for what took three."""
    study = _CLAIM_START.first(
        connection.alias, study=study_id, user=user.pk, annotator=annotator.pk, now=now
    )
    if study is None:
        raise NotFoundError(f"study {study_id} does not exist or you are not enrolled in it")
    extra: Any = study
    return _ClaimStart(
        study=study,
        quota=extra.claim_quota,
        expert=extra.claim_pool == Pool.EXPERT,
        holds_lease=bool(extra.claim_holds),
        opening=policy_opening(study, stored=extra.claim_opening),
        attributes=extra.claim_attributes,
    )


@transaction.atomic
def assignment_claim_for_user(
    *, user: User, study_id: int, annotator: Annotator, exclude: Iterable[int] = (), now: Any = None
) -> tuple[Study, Assignment | None]:
    """``assignment_claim_next`` for the account ``user`` in study ``study_id``, read in fewer queries.

    The study is found as ``access.study_get_for_annotator`` finds it (``NotFoundError`` otherwise),
    in the same query as the enrolment (pool, quota) and whether a lease is held; then the claim
    is the same as ``assignment_claim_next``'s, in the same transaction. Returns the study and the
    lease (or None). The claim API and the submit-and-claim-next call use it.
    """
    now = now or timezone.now()
    start = _claim_start(user=user, study_id=study_id, annotator=annotator, now=now)
    _check_claimable(start.study, annotator)
    pool, refusal = _pool_or_refusal(start.study, start.attributes)
    return start.study, _claim(
        study=start.study,
        annotator=annotator,
        exclude=exclude,
        now=now,
        quota=start.quota,
        expert=start.expert,
        holds_lease=start.holds_lease,
        opening=start.opening,
        pool=pool,
        refusal=refusal,
    )


def _claim(
    *,
    study: Study,
    annotator: Annotator,
    exclude: Iterable[int],
    now: Any,
    quota: int | None,
    expert: bool,
    opening: int,
    holds_lease: bool = True,
    pool: ClaimPool = NO_POOL,
    refusal: PoolNotCollected | None = None,
) -> Assignment | None:
    """The claim itself, in the caller's transaction. ``holds_lease`` False: the caller read, in this
    transaction, that the annotator holds no live lease in the study (the lookup is skipped).
    ``opening``: the slots of an item nobody judged under the study's policy (``policy_opening``).
    ``pool``: the annotator's rater pool (copied onto the lease) and its quota per item, if any;
    ``refusal``: why the study's pool quotas give them nothing new (raised after a held lease is looked
    up: that one still comes back)."""
    expires = now + timedelta(minutes=study.lease_minutes)
    held = None
    if holds_lease:
        held = (
            Assignment.objects.select_for_update(of=("self",))
            .select_related("item")
            .filter(study=study, annotator=annotator)
            .filter(_active_lease(now))
            .exclude(pk__in=list(exclude))
            .order_by("created_at", "id")
            .first()
        )
    if held is not None:
        held.lease_expires_at = expires
        held.save(update_fields=["lease_expires_at"])
        held.study, held.annotator = study, annotator
        return held
    if refusal is not None:
        raise refusal
    if quota is not None:
        _check_quota(study=study, annotator=annotator, quota=quota, now=now)
    # Control items (gold, attention checks) at the study's rate, or only gold while qualifying:
    # see annotations/services/controls.py. No query when the study uses neither.
    plan = control_plan(study=study, annotator=annotator, now=now)
    if plan.kinds:
        control = control_candidate(
            study=study, annotator=annotator, expert=expert, kinds=plan.kinds, index=plan.index
        )
        if control is not None:
            return _lease_control(
                item=control, study=study, annotator=annotator, expires=expires, rater_pool=pool.value
            )
    if plan.only:
        return None
    seed = annotator_seed(study_id=study.pk, annotator_id=annotator.pk)
    tried: list[int] = []
    for given_back, level, wrapped in _passes(study):
        for _attempt in range(CLAIM_ATTEMPTS):
            if tried:
                item = (
                    _candidates(
                        study=study,
                        annotator=annotator,
                        expert=expert,
                        now=now,
                        level=level,
                        seed=seed,
                        wrapped=wrapped,
                        given_back=given_back,
                        opening=opening,
                        exclude=tried,
                        pool=pool,
                    )
                    .select_for_update(skip_locked=True, of=("self",))
                    .first()
                )
            else:  # the same query, compiled once per process and database
                pooled = pool.quota is not None
                item = _CANDIDATE[(expert, wrapped, given_back, pooled)].first(
                    connection.alias,
                    study=study.pk,
                    annotator=annotator.pk,
                    opening=opening,
                    level=level,
                    seed=seed,
                    now=now,
                    **({"pool_quota": pool.quota, "rater_pool": pool.value} if pooled else {}),
                )
            if item is None:
                break
            if not given_back:
                # The insert counts the item's occupancy again, under the item's lock (everyone who adds
                # a lease on this item holds it), and writes nothing when the item is full.
                lease = _lease_new(
                    item=item,
                    study=study,
                    annotator=annotator,
                    expires=expires,
                    now=now,
                    opening=opening,
                    pool=pool,
                )
                if lease is not None:
                    return lease
                tried.append(item.pk)
                continue
            # Counted again under the item's lock: everyone who adds a lease on this item holds this lock.
            occupied = _occupied_by_others(item.pk, now=now, pool=pool.value, annotator=annotator)
            if occupied["all"] < slots_of(item, opening) and pool.admits(occupied["pool"]):
                return _lease(
                    item=item,
                    study=study,
                    annotator=annotator,
                    expires=expires,
                    fresh=not given_back,
                    rater_pool=pool.value,
                )
            tried.append(item.pk)
    return None


def _occupied_by_others(item_id: int, *, now: Any, pool: str, annotator: Annotator) -> dict[str, int]:
    """The item's submitted and live leased judgements by others than ``annotator``: ``all`` of them and
    those of the rater ``pool`` (one query)."""
    return (
        Assignment.objects.filter(_occupying(now), item_id=item_id)
        .exclude(annotator=annotator)
        .aggregate(all=Count("id"), pool=Count("id", filter=Q(rater_pool=pool)))
    )


def _lease_new(
    *,
    item: Item,
    study: Study,
    annotator: Annotator,
    expires: Any,
    now: Any,
    opening: int,
    pool: ClaimPool = NO_POOL,
) -> Assignment | None:
    """Lease an item this annotator never had, if fewer than its slots (``Item.policy_slots``, else
    ``opening``: the overlap under ``fixed:K``) are occupied by others: one
    ``INSERT ... SELECT ... WHERE (count) < COALESCE(slots, opening) RETURNING id`` (SQLite >= 3.35 and
    PostgreSQL), the recount, the item's slots as the last submit left them and the insert in one
    statement. Under a pool quota the same statement also counts the item's judgements of the annotator's
    pool (``pool_quotas.pool_recount_sql``). None when the item is full (or its pool's share is)."""
    table = Assignment._meta.db_table
    item_table = Item._meta.db_table
    quote = connection.ops.quote_name
    columns = ["study_id", "item_id", "annotator_id", "status", "lease_expires_at", "skip_reason"]
    columns += ["created_at", "rater_pool"]
    stamp = connection.ops.adapt_datetimefield_value
    sql = (
        f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) "
        f"SELECT %s, %s, %s, %s, %s, %s, %s, %s WHERE ("
        f"SELECT COUNT(*) FROM {quote(table)} "
        f"WHERE {quote('item_id')} = %s AND {quote('annotator_id')} <> %s "
        f"AND ({quote('status')} = %s OR ({quote('status')} = %s AND {quote('lease_expires_at')} > %s))"
        f") < COALESCE((SELECT {quote('policy_slots')} FROM {quote(item_table)} "
        f"WHERE {quote('id')} = %s), %s)"
        f"{pool_recount_sql(quote) if pool.quota is not None else ''} RETURNING {quote('id')}"
    )
    created = timezone.now()
    recount = [item.pk, annotator.pk, Status.SUBMITTED.value, Status.LEASED.value, stamp(now)]
    params: list[Any] = [
        study.pk,
        item.pk,
        annotator.pk,
        Status.LEASED.value,
        stamp(expires),
        "",
        stamp(created),
        pool.value,
        *recount,
        item.pk,
        opening,
    ]
    if pool.quota is not None:
        params += [item.pk, annotator.pk, pool.value, *recount[2:], pool.quota]
    with statement_cursor(connection) as cursor:  # planned once per connection on PostgreSQL
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    assignment = Assignment(
        id=row[0],
        study=study,
        item=item,
        annotator=annotator,
        status=Status.LEASED,
        lease_expires_at=expires,
        created_at=created,
        rater_pool=pool.value,
    )
    assignment._state.adding = False
    assignment._state.db = connection.alias
    return assignment


def _lease(
    *, item: Item, study: Study, annotator: Annotator, expires: Any, fresh: bool, rater_pool: str = ""
) -> Assignment:
    """Write the lease. ``fresh``: the candidate query already showed this annotator never had the item.
    ``rater_pool``: the annotator's rater pool now (``Assignment.rater_pool``)."""
    previous = None if fresh else Assignment.objects.filter(item=item, annotator=annotator).first()
    if previous is None:
        assignment = Assignment.objects.create(
            study=study,
            item=item,
            annotator=annotator,
            status=Status.LEASED,
            lease_expires_at=expires,
            rater_pool=rater_pool,
        )
        assignment.study, assignment.item, assignment.annotator = study, item, annotator
        return assignment
    # Only an expired or released lease can be here (the candidate query excludes the rest); a draft
    # left from that lease is not this one's.
    drafts_drop([previous.pk])
    previous.status, previous.lease_expires_at, previous.rater_pool = Status.LEASED, expires, rater_pool
    previous.save(update_fields=["status", "lease_expires_at", "rater_pool"])
    return previous


def _lease_control(
    *, item: Item, study: Study, annotator: Annotator, expires: Any, rater_pool: str = ""
) -> Assignment:
    """Lease a control item. Controls are not locked like real items (every annotator may have each),
    so the same person claiming in two tabs at once can pick the same control: the second insert then
    meets the unique (item, annotator) constraint, and gets the lease the first just made."""
    try:
        with transaction.atomic():
            return _lease(
                item=item,
                study=study,
                annotator=annotator,
                expires=expires,
                fresh=True,
                rater_pool=rater_pool,
            )
    except IntegrityError:
        held = Assignment.objects.filter(item=item, annotator=annotator, status=Status.LEASED).first()
        if held is None:
            raise Conflict(
                "this item was just handed to you elsewhere; ask for the next item again"
            ) from None
        held.study, held.item, held.annotator = study, item, annotator
        return held


def _locked(assignment: Assignment) -> Assignment:
    return (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("study", "item", "annotator")
        .get(pk=assignment.pk)
    )


def _check_owner(assignment: Assignment, user: User | None) -> None:
    if user is not None and assignment.annotator.user_id != user.pk:
        raise NotAllowed("this is not your assignment")


@transaction.atomic
def assignment_submit(
    *,
    assignment: Assignment,
    answers: Mapping[str, Mapping[str, Any]],
    source: str = Annotation.Source.UI,
    time_spent_ms: int | None = None,
    user: User | None = None,
    now: Any = None,
) -> Assignment:
    """Validate and store an annotator's answers to one item; also used to edit a submitted item.

    Idempotent: the assignment row is locked first, so a double-clicked submit waits for the first
    and then finds the same answers already stored (no second annotation, no revision). Answers are
    stored by ``annotation_writes.annotations_save`` as this item's whole set: a changed answer keeps
    the old one as a revision and takes this submit's ``time_spent_ms``; answers no longer given are
    removed. ``Assignment.time_spent_ms`` stays the first submit's. A lease that expired is
    accepted only while the item still has a free slot (counted under the item's lock).
    Raises ``SubmissionError`` (errors per question) when an answer is not valid; nothing is written.
    """
    now = now or timezone.now()
    assignment = _locked(assignment)
    _check_owner(assignment, user)
    return _submit(
        assignment, answers=answers, source=source, time_spent_ms=time_spent_ms, now=now, stored=True
    )


def _submit_read_query(*, id: int, user: int) -> QuerySet[Assignment]:
    return (
        own_assignments(user_id=user)  # the access rule of the pages (annotations/access.py)
        .select_for_update(of=("self",))
        .select_related("study__quality", "item", "annotator")
        .filter(pk=id)
        .annotate(
            submit_stored=Exists(
                Annotation.objects.filter(item_id=OuterRef("item_id"), annotator_id=OuterRef("annotator_id"))
            ),
            submit_pool=Subquery(
                Enrollment.objects.filter(study_id=OuterRef("study_id"), user_id=user).values("pool")[:1]
            ),
            # A draft is saved under this row's lock (services/drafts.py), so this read is exact: the
            # submit deletes one only where there is one (no fifth statement on the hot path).
            submit_drafted=Exists(AssignmentDraft.objects.filter(assignment_id=OuterRef("pk"))),
        )
        .order_by("pk")[:1]
    )


# Compiled once per process and database (common/prepared_query.py).
_SUBMIT_READ = PreparedQuery(_submit_read_query, ("id", "user"))


@transaction.atomic
def assignment_submit_for_user(
    *,
    user: User,
    id: int,
    answers: Mapping[str, Mapping[str, Any]],
    source: str = Annotation.Source.API,
    time_spent_ms: int | None = None,
    now: Any = None,
) -> Assignment:
    """``assignment_submit`` of the account's own assignment ``id`` (``NotFoundError`` for anyone
    else's, as ``access.assignment_get_for_user``), read in one query: the assignment locked, with
    its study (and quality settings), item and annotator, whether the annotator has stored answers
    on the item, and their pool in the study. The rest is ``assignment_submit``'s."""
    now = now or timezone.now()
    found = _SUBMIT_READ.first(connection.alias, id=id, user=user.pk)
    if found is None:
        raise NotFoundError(f"assignment {id} does not exist or is not yours")
    extra: Any = found
    return _submit(
        found,
        answers=answers,
        source=source,
        time_spent_ms=time_spent_ms,
        now=now,
        stored=bool(extra.submit_stored),
        expert_pool=extra.submit_pool == Pool.EXPERT,
        drafted=bool(extra.submit_drafted),
    )


def _submit(
    assignment: Assignment,
    *,
    answers: Mapping[str, Mapping[str, Any]],
    source: str,
    time_spent_ms: int | None,
    now: Any,
    stored: bool,
    expert_pool: bool | None = None,
    drafted: bool = True,
) -> Assignment:
    """The submit of a locked assignment, in the caller's transaction. ``stored`` False: the caller read,
    under the lock, that the annotator has no stored answer on the item (the read is skipped);
    ``drafted`` False: that the assignment has no server-side draft (none is deleted).
    ``expert_pool``: the annotator's pool in the study if the caller read it (else it is looked up)."""
    if assignment.status == Status.SKIPPED:
        raise Conflict("you skipped this item; it cannot be answered now")
    if (
        assignment.status != Status.SUBMITTED
        and not assignment.item.control_kind
        and not (
            assignment.status == Status.LEASED
            and assignment.lease_expires_at
            and assignment.lease_expires_at > now
        )
    ):  # (a control item has no slots to fill: every annotator may answer it)
        fresh = item_lock_or_none(assignment.item_id)
        occupied = _occupied_by_others(
            assignment.item_id, now=now, pool=assignment.rater_pool, annotator=assignment.annotator
        )
        # The item's slots as its last submit left them: an item its policy stopped takes no late submit;
        # nor does one whose share of the lease's rater pool is full (selectors/pool_quotas.py).
        if (
            fresh is None
            or occupied["all"] >= slots_of(fresh, policy_opening(assignment.study))
            or not late_submit_pool(assignment.study, assignment.rater_pool).admits(occupied["pool"])
        ):
            raise Conflict("your lease on this item expired and others have judged it; take the next item")
    if time_spent_ms is not None and (
        isinstance(time_spent_ms, bool) or not isinstance(time_spent_ms, int) or time_spent_ms < 0
    ):
        raise ValidationFailed("time_spent_ms must be a non-negative integer")
    item, study = assignment.item, assignment.study
    protocol = study.protocol_obj
    if expert_pool is None or not any(question.expert_only for question in protocol.questions):
        expert = sees_expert_questions(study=study, annotator=assignment.annotator)
    else:
        expert = expert_pool
    cleaned = clean_submission(
        protocol,
        answers,
        # Image sizes only bound boxes: no query for them when no boxes are given.
        context=item_context(item)
        if any(protocol.has_question(key) and protocol.question(key).kind == "boxes" for key in answers)
        else ItemContext(metadata=item.metadata),
        expert=expert,
    )
    annotator = assignment.annotator
    annotations_save(
        study_id=item.study_id,
        answers=[
            AnswerToSave(item_id=item.pk, annotator=annotator, answer=answer, time_spent_ms=time_spent_ms)
            for answer in cleaned
        ],
        source=source,
        whole_sets=[(item.pk, annotator.pk)],
        nothing_stored=not stored,
    )
    first = assignment.status != Status.SUBMITTED
    if first:
        if drafted:
            drafts_drop([assignment.pk])  # the answers are stored now (a draft is kept only for a lease)
        assignment_mark_submitted(assignment, now=now, time_spent_ms=time_spent_ms)
    _item_judged(item=item, study=study, annotator=annotator, cleaned=cleaned, first=first)
    return assignment


def _item_judged(*, item: Item, study: Study, annotator: Annotator, cleaned: list[Any], first: bool) -> None:
    """Count a first submit on the item (the claim order reads ``judgements``) and, under an overlap
    policy, write what the claim reads next: the annotator's vote, the item's slots and whether the
    policy stopped it (``selectors/overlap.py``), from the item and the study this submit already holds.

    One statement, as before policies: an ``UPDATE`` of the item that holds only if no other submit
    changed its count or votes since this submit read them (two submits on one item at once, on
    PostgreSQL); the loser locks the row, reads it and the study's policy again and writes (two
    statements more, only then)."""
    policy = study_policy(study)
    if isinstance(policy, FixedPolicy) or item.control_kind:
        if first:
            item_count_judgement(item.pk)
        return
    question = policy_question(study)
    answer = next((a.value for a in cleaned if question is not None and a.question_key == question.key), None)
    votes = votes_with(item.policy_votes, annotator.pk, answer)
    state = item_policy_state(study, votes, item.judgements + first)
    if not first and (state.votes, state.slots, state.stopped) == (
        item.policy_votes,
        item.policy_slots,
        item.policy_stopped,
    ):
        return  # an edit that changes nothing the policy reads
    written = Item.objects.filter(
        pk=item.pk, judgements=item.judgements, policy_votes=item.policy_votes
    ).update(
        judgements=item.judgements + first,
        policy_votes=state.votes,
        policy_slots=state.slots,
        policy_stopped=state.stopped,
    )
    if written:
        return
    fresh = item_lock(item.pk)
    current = Study.objects.get(pk=study.pk)
    votes = votes_with(fresh.policy_votes, annotator.pk, answer)
    state = item_policy_state(current, votes, fresh.judgements + first)
    Item.objects.filter(pk=item.pk).update(
        judgements=F("judgements") + int(first),
        policy_votes=state.votes,
        policy_slots=state.slots,
        policy_stopped=state.stopped,
    )


@transaction.atomic
def assignment_skip(
    *, assignment: Assignment, reason: str, user: User | None = None, now: Any = None
) -> Assignment:
    """Give up an item for good, with a reason; its slot goes back to others. Not after submitting."""
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("say why you skip this item", {"reason": "required"})
    if len(reason) > MAX_SKIP_REASON:
        raise ValidationFailed(
            f"the reason is longer than {MAX_SKIP_REASON} characters", {"reason": "too long"}
        )
    assignment = _locked(assignment)
    _check_owner(assignment, user)
    if assignment.status == Status.SUBMITTED:
        raise Conflict("you already answered this item; change your answers instead of skipping")
    if assignment.status == Status.SKIPPED:
        return assignment
    assignment.status, assignment.skip_reason = Status.SKIPPED, reason
    drafts_drop([assignment.pk])
    assignment.lease_expires_at, assignment.completed_at = None, now or timezone.now()
    assignment.save(update_fields=["status", "skip_reason", "lease_expires_at", "completed_at"])
    return assignment


@transaction.atomic
def assignment_release(*, assignment: Assignment, user: User | None = None, now: Any = None) -> Assignment:
    """Hand a leased item back unanswered; it may come back to this annotator later (last in order)."""
    assignment = _locked(assignment)
    _check_owner(assignment, user)
    if assignment.status != Status.LEASED:
        raise Conflict(f"this assignment is {assignment.status}, not leased")
    assignment.status, assignment.lease_expires_at = Status.EXPIRED, now or timezone.now()
    assignment.save(update_fields=["status", "lease_expires_at"])
    drafts_drop([assignment.pk])
    return assignment


@transaction.atomic
def assignments_expire(*, study: Study | None = None, now: Any = None) -> int:
    """Mark leases past their expiry as expired (bookkeeping only: claims already ignore them)."""
    leases = Assignment.objects.filter(status=Status.LEASED, lease_expires_at__lte=now or timezone.now())
    if study is not None:
        leases = leases.filter(study=study)
    drafts_drop(leases)
    return leases.update(status=Status.EXPIRED)
