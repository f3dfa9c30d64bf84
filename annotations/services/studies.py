"""Creating and changing studies, sharing them, enrolling annotators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotations.access import (
    accounts_enrollable_by,
    enrollable_account_get,
    enrollment_check,
    studies_writable_by,
    study_can_write,
)
from annotations.locks import study_lock
from annotations.models import Annotator, Assignment, Enrollment, Item, Participant, Pool, Study, User
from annotations.selectors.overlap import (
    StoredModel,
    item_policy_state,
    policy_model_record,
    policy_question,
    policy_votes,
    study_policy,
)
from annotations.selectors.studies import launch_refusal
from annotations.services.drafts import drafts_drop
from annotations.services.rater_pools import pool_quotas_within_overlap, study_rater_pools_set
from annotations.services.study_options import study_options_replace
from common.errors import Conflict, NotAllowed, NotFoundError, ValidationFailed, WorkbenchError
from metrics.overlap_policy import FixedPolicy, Policy, PolicyError, PosteriorPolicy, policy_parse
from protocols.schema import (
    Protocol,
    ProtocolError,
    load_preset,
    load_protocol_text,
    protocol_from_dict,
)

MAX_OVERLAP = 100
POLICY_FIELDS = ("overlap_policy", "overlap_question")
POOL_FIELDS = ("rater_pool_attribute", "rater_pool_quotas")


def protocol_resolve(
    *,
    preset: str | None = None,
    protocol_text: str | None = None,
    protocol: dict[str, Any] | None = None,
    source: str = "",
) -> Protocol:
    """Exactly one of a preset key, protocol YAML/JSON text or a protocol dict; validated."""
    given = [value is not None and value != "" for value in (preset, protocol_text, protocol)]
    if sum(given) != 1:
        raise ValidationFailed("give exactly one of a preset or a protocol")
    try:
        if preset:
            return load_preset(preset)
        if protocol_text:
            return load_protocol_text(protocol_text, source=source)
        return protocol_from_dict(protocol, source=source)
    except ProtocolError as exc:
        raise ValidationFailed(str(exc), {"protocol": str(exc)}) from exc


def _check_numbers(*, overlap: int, lease_minutes: int) -> None:
    if not 1 <= overlap <= MAX_OVERLAP:
        raise ValidationFailed(f"overlap must be between 1 and {MAX_OVERLAP}", {"overlap": "out of range"})
    if not 1 <= lease_minutes <= 7 * 24 * 60:
        raise ValidationFailed("lease_minutes must be between 1 and 10080", {"lease_minutes": "out of range"})


@transaction.atomic
def study_create(
    *,
    owner: User,
    name: str,
    protocol: Protocol,
    preset: str = "",
    overlap: int = 3,
    lease_minutes: int = 30,
    description: str = "",
    imported_from: str = "",
    status: str = Study.Status.ACTIVE,
) -> Study:
    """Create a study owned by a researcher (or admin); ``imported_from``: the file it came from, if any.

    ``status``: the study page and the REST API create a ``draft`` (launched later by ``study_launch``);
    imports and commands, which bring their items with them, create it ``active``.
    """
    if status not in Study.Status.values:
        raise ValidationFailed(
            f"status must be one of {', '.join(Study.Status.values)}", {"status": "invalid"}
        )
    if not owner.is_researcher:
        raise NotAllowed("only researchers and admins create studies")
    name = name.strip()
    if not name:
        raise ValidationFailed("a study needs a name", {"name": "required"})
    _check_numbers(overlap=overlap, lease_minutes=lease_minutes)
    study = Study(
        owner=owner,
        name=name[:200],
        description=description,
        preset=preset or protocol.key,
        protocol=protocol.to_dict(),
        overlap=overlap,
        lease_minutes=lease_minutes,
        imported_from=imported_from[:255],
        status=status,
    )
    study.full_clean()
    study.save()
    return study


UPDATABLE_FIELDS = ("name", "description", "overlap", "lease_minutes", "status", *POLICY_FIELDS, *POOL_FIELDS)


@transaction.atomic
def study_update(
    *,
    study: Study,
    options: Mapping[str, Any] | None = None,
    linkable: QuerySet[Study] | None = None,
    **changes: Any,
) -> Study:
    """Change a study's editable fields (not its protocol once annotations exist).

    ``options``, the settings as one object (the API's shape, see ``services/study_options.py``), replaces
    them all; ``linkable`` are the studies the caller may read (a visual-ness study must be one).
    """
    unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
    if unknown:
        raise ValidationFailed(f"'{unknown[0]}' cannot be changed here")
    if options is not None:
        study = study_options_replace(
            study=study, options=options, linkable=linkable if linkable is not None else Study.objects.none()
        )
    pools = {key: changes.pop(key) for key in POOL_FIELDS if key in changes}
    policy = {key: changes.pop(key) for key in POLICY_FIELDS if key in changes}
    if policy:
        study = study_overlap_set(
            study=study,
            policy=policy.get("overlap_policy"),
            question=policy.get("overlap_question"),
            overlap=changes.get("overlap"),
            check_pool_quotas=False,
        )
    if changes:
        study = _study_fields_update(study, changes)
    # Last, so pool quotas are checked against the overlap the request leaves (one transaction: a refusal
    # undoes the rest).
    if pools:
        return study_rater_pools_set(
            study=study, attribute=pools.get("rater_pool_attribute"), quotas=pools.get("rater_pool_quotas")
        )
    pool_quotas_within_overlap(study)
    return study


def _study_fields_update(study: Study, changes: dict[str, Any]) -> Study:
    """``study_update``'s plain fields: checked and saved under the study's lock."""
    study = study_lock(study.pk)
    if study.status == Study.Status.DRAFT and changes.get("status") == Study.Status.ACTIVE:
        refusal = launch_refusal(study)
        if refusal:
            raise ValidationFailed(f"the study cannot be launched: {refusal}", {"status": "not ready"})
    for field, value in changes.items():
        setattr(study, field, value)
    _check_numbers(overlap=study.overlap, lease_minutes=study.lease_minutes)
    _check_overlap_follows_policy(study)
    if study.status not in Study.Status.values:
        raise ValidationFailed(
            f"status must be one of {', '.join(Study.Status.values)}", {"status": "invalid"}
        )
    if not study.name.strip():
        raise ValidationFailed("a study needs a name", {"name": "required"})
    study.save(update_fields=[*changes, "updated_at"])
    return study


NOT_SHAREABLE = "no researcher named {username!r} with whom this study can be shared"


@transaction.atomic
def study_share(*, study: Study, username: str) -> User:
    """Let the researcher named ``username`` see and change the study.

    Every refusal (no such account, an account that is not a researcher's, the owner) is the same
    ValidationFailed with the same message, so sharing tells no one which usernames exist or what
    role they have (docs/security.md, "Sharing a study")."""
    other = User.objects.filter(username=username).exclude(pk=study.owner_id).first()
    if other is None or not other.is_researcher:
        raise ValidationFailed(NOT_SHAREABLE.format(username=username), {"username": "not shareable"})
    study.shared_with.add(other)
    return other


def annotator_for_user(*, user: User) -> Annotator:
    """The human annotator record of an account, created on first use. Free when the account was
    loaded with its annotator (``select_related``, as the API's token authentication does).

    It holds no pool and no demographic answers: those belong to each enrolment (per study)."""
    try:
        return user.annotator
    except Annotator.DoesNotExist:
        pass
    annotator, _created = Annotator.objects.get_or_create(
        user=user, defaults={"kind": Annotator.Kind.HUMAN, "name": user.username}
    )
    return annotator


def _check_pool(pool: str | None) -> None:
    if pool is not None and pool not in Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Pool.values)}", {"pool": "invalid"})


@transaction.atomic
def enrollment_add(
    *,
    study: Study,
    user: User,
    pool: str | None = None,
    by: User | None = None,
    attributes: dict[str, Any] | None = None,
) -> Enrollment:
    """Enrol an account in a study (idempotent) and make sure it has an annotator record.

    ``pool`` is the account's pool *in this study* (default crowd for a new enrolment; an existing
    enrolment keeps its pool unless one is given); ``attributes`` its demographic answers to this
    study. Nothing of another study changes. ``by``: the person asking, held to the enrolment rule
    (``access.enrollment_check``); None only for the workbench's own steps (an invitation's join,
    the demo, tests). An account made by an invitation (a participant) belongs to its study only and
    is refused elsewhere.
    """
    _check_pool(pool)
    if by is not None:
        enrollment_check(by=by, study=study, user=user)
    if Participant.objects.filter(user=user).exclude(study=study).exists():
        raise NotAllowed(f"{user.username} joined another study through an invitation and is limited to it")
    annotator_for_user(user=user)
    enrollment, created = Enrollment.objects.select_for_update().get_or_create(
        study=study,
        user=user,
        defaults={"pool": pool or Pool.CROWD, "attributes": attributes or {}},
    )
    changed = []
    if not created and pool is not None and enrollment.pool != pool:
        enrollment.pool = pool
        changed.append("pool")
    if not created and attributes is not None and enrollment.attributes != attributes:
        enrollment.attributes = attributes
        changed.append("attributes")
    if changed:
        enrollment.save(update_fields=changed)
    return enrollment


MAX_ENROLLED_AT_ONCE = 500


@transaction.atomic
def enrollments_add_many(*, study: Study, usernames: list[str], pool: str, by: User) -> list[Enrollment]:
    """Enrol several accounts at once in ``pool``, all or none: each name is held to the same rule as
    one enrolment (``enrollable_account_get``, ``enrollment_add``); when any is refused nobody is
    enrolled and the error names every refused account."""
    names = list(dict.fromkeys(name.strip() for name in usernames if name.strip()))
    if not names:
        raise ValidationFailed("name at least one account", {"usernames": "empty"})
    if len(names) > MAX_ENROLLED_AT_ONCE:
        raise ValidationFailed(
            f"at most {MAX_ENROLLED_AT_ONCE} accounts at once ({len(names)} given)", {"usernames": "too many"}
        )
    enrolled, problems = [], []
    for name in names:
        try:
            user = enrollable_account_get(by=by, username=name)
            with transaction.atomic():
                enrolled.append(enrollment_add(study=study, user=user, pool=pool, by=by))
        except WorkbenchError as exc:
            problems.append(exc.message)
    if problems:
        raise ValidationFailed(
            f"nobody was enrolled: {'; '.join(problems)}", {"usernames": "; ".join(problems)}
        )
    return enrolled


@transaction.atomic
def enrollment_remove(*, study: Study, user: User, by: User) -> int:
    """Unenrol an account: it gets no more items of the study and its live leases go back (returns how
    many). Its answers stay and keep counting (exclude it to stop that: ``services/quality.py``).
    Refused for an account that joined through an invitation (it belongs to this study) and for an
    enrolment holding demographic answers (removing it would lose them)."""
    if not study_can_write(by, study):
        raise NotAllowed("you may read this study but not change it")
    enrollment = Enrollment.objects.select_for_update().filter(study=study, user=user).first()
    if enrollment is None:
        raise NotFoundError(f"{user.username} is not enrolled in this study")
    if Participant.objects.filter(user=user, study=study).exists():
        raise Conflict(
            f"{user.username} joined through an invitation link and belongs to this study: exclude them "
            "on the progress page instead"
        )
    if enrollment.attributes:
        raise Conflict(
            f"{user.username} gave demographic answers to this study; unenrolling would lose them: "
            "exclude them on the progress page instead"
        )
    leases = Assignment.objects.filter(study=study, annotator__user=user, status=Assignment.Status.LEASED)
    drafts_drop(leases)
    released = leases.update(status=Assignment.Status.EXPIRED, lease_expires_at=timezone.now())
    enrollment.delete()
    return released


@transaction.atomic
def enrollment_add_pool(*, study: Study, pool: str, by: User) -> list[Enrollment]:
    """Enrol, in ``pool``, every account ``by`` may enrol that is of that pool in another study ``by``
    may change (admins: in any study; for the crowd pool, admins also take annotator accounts never
    enrolled anywhere). Idempotent: an account already enrolled here keeps its pool here.

    The candidates are ``access.accounts_enrollable_by(by)``: never staff, researchers or admins,
    never another researcher's annotators, never participants (each belongs to its own study).
    """
    if pool not in Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Pool.values)}", {"pool": "invalid"})
    candidates = (
        accounts_enrollable_by(by)
        .filter(is_active=True, participant__isnull=True)
        .exclude(enrollments__study=study)
    )
    source = Enrollment.objects.filter(pool=pool)
    if not by.is_admin:
        source = source.filter(study__in=studies_writable_by(by))
    of_pool = Q(pk__in=source.values("user_id"))
    if pool == Pool.CROWD and by.is_admin:
        of_pool |= ~Q(pk__in=Enrollment.objects.values("user_id"))
    users = candidates.filter(of_pool).distinct().order_by("username")
    return [enrollment_add(study=study, user=user, pool=pool) for user in users]


@transaction.atomic
def study_launch(*, study: Study) -> Study:
    """Launch a draft study: it becomes active and hands out items (refused with the reason when it has
    no items or no one to judge them; see ``launch_refusal``)."""
    locked = study_lock(study.pk)
    if locked.status != Study.Status.DRAFT:
        raise ValidationFailed(
            f"the study is already {locked.get_status_display().lower()}; only a draft is launched",
            {"status": "not a draft"},
        )
    return study_update(study=locked, status=Study.Status.ACTIVE)


def study_set_running(*, study: Study, running: bool) -> Study:
    """Pause (no new items are handed out; leases held can still be submitted) or resume a study."""
    if study.status == Study.Status.CLOSED:
        raise ValidationFailed("a closed study cannot be paused or resumed; change its status in settings")
    if study.status == Study.Status.DRAFT:
        raise ValidationFailed("the study is a draft: launch it from its study page first")
    return study_update(study=study, status=Study.Status.ACTIVE if running else Study.Status.PAUSED)


@transaction.atomic
def study_set_reveal(*, study: Study, reveal: bool) -> Study:
    """Switch reveal after submit: show machine labels to a person once they have answered (and log it)."""
    if not isinstance(reveal, bool):
        raise ValidationFailed("reveal_after_submit must be true or false")
    locked = study_lock(study.pk)
    locked.reveal_after_submit = reveal
    locked.save(update_fields=["reveal_after_submit", "updated_at"])
    study.reveal_after_submit = reveal
    return locked


# --- The overlap policy (docs/overlap.md, "A study under a policy") --------------------------------


def _check_overlap_follows_policy(study: Study) -> None:
    """Under ``agree`` or ``posterior`` the overlap is the policy's MAX (coverage and the claim's levels
    read it): a different overlap is refused, not silently kept."""
    if not study.overlap_policy:
        return
    policy = study_policy(study)
    if study.overlap != policy.max:
        raise ValidationFailed(
            f"the overlap follows the overlap policy {policy} (its MAX, {policy.max}); change the policy "
            f"(e.g. fixed:{study.overlap}) to change it",
            {"overlap": "follows the policy"},
        )


def _policy_read(text: str) -> Policy:
    try:
        policy = policy_parse(text)
    except PolicyError as exc:
        raise ValidationFailed(str(exc), {"overlap_policy": "invalid"}) from exc
    if policy.max > MAX_OVERLAP:
        raise ValidationFailed(
            f"a policy's MAX (or fixed K) must be at most {MAX_OVERLAP}", {"overlap_policy": "out of range"}
        )
    return policy


def _policy_text(policy: Policy, given: str) -> str:
    """The policy as stored: its canonical form when that reads back the same, else as given."""
    canonical = str(policy)
    try:
        same = policy_parse(canonical) == policy
    except PolicyError:
        same = False
    return canonical if same else given.strip().lower()


@transaction.atomic
def study_overlap_set(
    *,
    study: Study,
    policy: str | None = None,
    question: str | None = None,
    overlap: int | None = None,
    check_pool_quotas: bool = True,
) -> Study:
    """Set the study's overlap policy (``fixed:K``, ``agree:K/MAX``, ``posterior:P/MAX``) and the question it
    reads (``""``: the protocol's first single, binary or likert question); None keeps either as it is.

    The overlap becomes K (fixed) or MAX; ``overlap``, when the same request changes it too, must agree.
    A posterior policy fits its Dawid-Skene model on the study's answers now (``overlap_model``). Every
    item's claim state is then decided again under the new policy (``study_overlap_recount``): an item
    stopped under the old one may be open again, and the reverse. Saving the same policy again refits.
    An overlap below a rater pool's quota is refused (``check_pool_quotas`` False: the caller checks)."""
    locked = study_lock(study.pk)
    given = policy if policy is not None else (locked.overlap_policy or f"fixed:{locked.overlap}")
    parsed = _policy_read(given)
    if overlap is not None and overlap != parsed.max:
        raise ValidationFailed(
            f"overlap {overlap} and the overlap policy {parsed} disagree: the overlap is the policy's "
            f"{'K' if isinstance(parsed, FixedPolicy) else 'MAX'} ({parsed.max})",
            {"overlap": "follows the policy"},
        )
    key = locked.overlap_question if question is None else question.strip()
    chosen = policy_question(locked, key)
    if key and chosen is None:
        raise ValidationFailed(
            f"a policy reads a single, binary or likert question of the protocol; {key!r} is not one",
            {"overlap_question": "not a policy question"},
        )
    if chosen is None and not isinstance(parsed, FixedPolicy):
        raise ValidationFailed(
            f"{parsed} needs a single, binary or likert question to read, and this protocol has none",
            {"overlap_policy": "no question"},
        )
    locked.overlap_policy = "" if isinstance(parsed, FixedPolicy) else _policy_text(parsed, given)
    locked.overlap = parsed.max
    if check_pool_quotas:
        pool_quotas_within_overlap(locked)
    locked.overlap_question = key
    locked.overlap_model = {}
    if isinstance(parsed, PosteriorPolicy) and chosen is not None:
        locked.overlap_model = policy_model_record(
            locked, chosen, parsed, fitted_at=timezone.now().isoformat(timespec="seconds")
        )
    locked.save(
        update_fields=["overlap_policy", "overlap", "overlap_question", "overlap_model", "updated_at"]
    )
    study_overlap_recount(study=locked, every=True)
    return locked


@transaction.atomic
def study_overlap_refit(*, study: Study) -> Study:
    """Fit a posterior policy's model again on the study's answers so far (between batches: the replay's
    ``--fit used``) and decide again the items still open; those it stopped stay stopped. Nothing to do
    under the other policies."""
    locked = study_lock(study.pk)
    policy = study_policy(locked)
    question = policy_question(locked)
    if not isinstance(policy, PosteriorPolicy) or question is None:
        return locked
    locked.overlap_model = policy_model_record(
        locked, question, policy, fitted_at=timezone.now().isoformat(timespec="seconds")
    )
    locked.save(update_fields=["overlap_model", "updated_at"])
    study_overlap_recount(study=locked, every=False)
    return locked


def study_overlap_recount(*, study: Study, every: bool = True) -> int:
    """Write each real item's claim state (``Item.policy_slots``, ``policy_votes``, ``policy_stopped``)
    as the study's policy decides it from the submitted answers (annotators not excluded); ``every``
    False: only the items not stopped. Under ``fixed:K`` the state is cleared (the overlap decides).
    Returns how many items changed. The caller holds the study's lock."""
    policy = study_policy(study)
    items = Item.objects.filter(study=study, control_kind="")
    if isinstance(policy, FixedPolicy):
        cleared = items.filter(Q(policy_slots__isnull=False) | Q(policy_stopped=True))
        return cleared.update(policy_slots=None, policy_stopped=False, policy_votes={})
    if not every:
        items = items.filter(policy_stopped=False)
    question = policy_question(study)
    votes = policy_votes(study, question.key) if question is not None else {}
    model = StoredModel.of(study)
    changed: list[Item] = []
    rows = items.values_list("id", "judgements", "policy_slots", "policy_stopped", "policy_votes")
    for item_id, judgements, slots, stopped, stored in rows.iterator(chunk_size=5000):
        state = item_policy_state(study, votes.get(item_id, {}), judgements, model)
        if (state.slots, state.stopped, state.votes) != (slots, stopped, stored):
            changed.append(
                Item(
                    pk=item_id,
                    policy_slots=state.slots,
                    policy_stopped=state.stopped,
                    policy_votes=state.votes,
                )
            )
    Item.objects.bulk_update(changed, ["policy_slots", "policy_stopped", "policy_votes"], batch_size=1000)
    return len(changed)
