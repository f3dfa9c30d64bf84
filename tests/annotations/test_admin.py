"""The Django admin's bulk work (Issue 16, point 5), through the admin's own pages and actions with
the Django test client: as a superuser, and refused to an account that is not staff."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from annotations.models import Assignment, Enrollment, Study, User
from annotations.services.studies import annotator_for_user, enrollment_add
from generation.models import GenerationJob
from labelling.models import LabellingJob
from protocols.schema import load_preset
from tests.factories import ItemFactory, MachineAnnotatorFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/annotations/user/import-csv/"


@pytest.fixture
def superuser(db: None) -> User:
    return UserFactory.create(username="boss", role="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def admin_client(superuser: User, settings) -> Client:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client = Client()
    client.force_login(superuser)
    return client


def _upload(client: Client, text: str, study: Study | None = None) -> str:
    from django.core.files.uploadedfile import SimpleUploadedFile

    data: dict[str, object] = {"file": SimpleUploadedFile("people.csv", text.encode()), "send_mail": "on"}
    if study is not None:
        data["study"] = study.pk
    response = client.post(IMPORT_URL, data)
    assert response.status_code == 200
    return response.content.decode()


def test_import_annotators_from_csv_row_by_row(admin_client: Client, owner: User) -> None:
    study = StudyFactory.create(owner=owner, name="Pilot")
    UserFactory.create(username="taken", email="taken@example.org")
    page = admin_client.get("/admin/annotations/user/")
    assert IMPORT_URL in page.content.decode()  # the change list links the import
    report = _upload(
        admin_client,
        "username,email,name,pool\n"
        "ada,ada@example.org,Ada Lovelace,crowd\n"
        "grace,grace@example.org,Grace Hopper,expert\n"
        "taken,new@example.org,Someone,\n"
        "bad name!,x@example.org,X,\n"
        "lin,not-an-email,Lin,\n"
        "ada,ada2@example.org,Ada Again,\n"
        "kim,kim@example.org,Kim,boss\n"
        "<b>eve</b>,eve@example.org,Eve,\n",
        study,
    )
    ada, grace = User.objects.get(username="ada"), User.objects.get(username="grace")
    assert not ada.has_usable_password() and ada.role == "annotator" and ada.last_name == "Lovelace"
    assert not grace.has_usable_password() and grace.email == "grace@example.org"
    pools = dict(Enrollment.objects.filter(study=study).values_list("user__username", "pool"))
    assert pools == {"ada": "crowd", "grace": "expert"}
    assert not User.objects.filter(username__in=["lin", "kim", "bad name!"]).exists()
    assert "2 created, 6 refused, 2 enrolled." in report
    for line, why in [
        (4, "exists already"),
        (5, "Enter a valid username"),
        (6, "is not an email address"),
        (7, "repeats the username of line 2"),
        (8, "is not one of"),
    ]:
        assert re.search(rf"<tr><td>{line}</td><td>[^<]*</td><td>[^<]*{why}", report), (line, why)
    assert "&lt;b&gt;eve&lt;/b&gt;" in report and "<b>eve" not in report
    assert len(mail.outbox) == 2 and mail.outbox[0].to == ["ada@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/[^\s<]+/)", report)
    assert link is not None and link.group(0) in mail.outbox[0].body
    confirm = Client().get(link.group(1), follow=True)
    assert "Choose a new password" in confirm.content.decode()


def test_a_csv_with_passwords_or_without_the_columns_is_refused_whole(admin_client: Client) -> None:
    report = _upload(admin_client, "username,email,name,password\nada,ada@example.org,Ada,secret\n")
    assert "File refused: unknown column &#x27;password&#x27;" in report
    report = _upload(admin_client, "user,mail\nada,ada@example.org\n")
    assert "missing: username, email, name" in report
    report = _upload(admin_client, "username,email,name,pool\nada,ada@example.org,Ada,crowd\n")
    assert "a pool needs a study" in report
    assert not User.objects.filter(username="ada").exists()


def test_send_password_reset_links_to_selected_accounts(admin_client: Client) -> None:
    mailed = UserFactory.create(username="m1", email="m1@example.org")
    silent = UserFactory.create(username="m2", email="")
    response = admin_client.post(
        "/admin/annotations/user/",
        {"action": "send_password_reset_links", "_selected_action": [mailed.pk, silent.pk]},
    )
    page = response.content.decode()
    assert response.status_code == 200 and page.count("/accounts/reset/") == 2
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["m1@example.org"]
    link = re.search(r"http://testserver(/accounts/reset/[^\s<]+/)", str(mail.outbox[0].body))
    assert link is not None
    client = Client()
    done = client.get(link.group(1), follow=True)  # Django moves the token into the session
    token_url = done.redirect_chain[-1][0]
    set_password = client.post(
        token_url, {"new_password1": "a-Long-pass-41", "new_password2": "a-Long-pass-41"}, follow=True
    )
    assert "Password set" in set_password.content.decode()
    mailed.refresh_from_db()
    assert mailed.check_password("a-Long-pass-41")


def test_bulk_enrol_selected_accounts_in_a_study_with_a_pool(admin_client: Client, owner: User) -> None:
    study = StudyFactory.create(owner=owner, name="Target")
    one = UserFactory.create(username="one", role="annotator")
    two = UserFactory.create(username="two", role="annotator")
    researcher = UserFactory.create(username="res2", role="researcher")
    selected = [one.pk, two.pk, researcher.pk]
    form = admin_client.post(
        "/admin/annotations/user/", {"action": "enrol_in_study", "_selected_action": selected}
    )
    assert form.status_code == 200 and "Enrol these 3 accounts" in form.content.decode()
    done = admin_client.post(
        "/admin/annotations/user/",
        {
            "action": "enrol_in_study",
            "_selected_action": selected,
            "apply": "Enrol",
            "study": study.pk,
            "pool": "expert",
        },
        follow=True,
    )
    page = done.content.decode()
    assert dict(Enrollment.objects.filter(study=study).values_list("user__username", "pool")) == {
        "one": "expert",
        "two": "expert",
    }
    assert "Enrolled in Target (expert): one, two." in page and "Not enrolled: res2" in page
    # Again, with one moved to another pool beforehand: nobody is reported as newly enrolled.
    Enrollment.objects.filter(study=study, user=two).update(pool="crowd")
    again = admin_client.post(
        "/admin/annotations/user/",
        {
            "action": "enrol_in_study",
            "_selected_action": [one.pk, two.pk],
            "apply": "Enrol",
            "study": study.pk,
            "pool": "expert",
        },
        follow=True,
    ).content.decode()
    assert "Enrolled in Target" not in again
    assert "Moved to the expert pool of Target: two." in again
    assert "Already enrolled in Target (expert), left as they were: one." in again


def _leased(study: Study, user: User, name: str) -> Assignment:
    item = ItemFactory.create(study=study, external_id=name)
    return Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator_for_user(user=user),
        status=Assignment.Status.LEASED,
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )


def test_release_leases_of_selected_assignments_and_studies(admin_client: Client, owner: User) -> None:
    study = StudyFactory.create(owner=owner)
    worker = UserFactory.create(username="w", role="annotator")
    enrollment_add(study=study, user=worker)
    first, second, third = (_leased(study, worker, name) for name in ("a", "b", "c"))
    response = admin_client.post(
        "/admin/annotations/assignment/",
        {"action": "release_leases", "_selected_action": [first.pk]},
        follow=True,
    )
    assert "Released 1 lease." in response.content.decode()
    first.refresh_from_db()
    assert first.status == Assignment.Status.EXPIRED
    again = admin_client.post(
        "/admin/annotations/assignment/",
        {"action": "release_leases", "_selected_action": [first.pk]},
        follow=True,
    )
    assert "were not leased and are unchanged" in again.content.decode()
    admin_client.post(
        "/admin/annotations/study/", {"action": "release_leases", "_selected_action": [study.pk]}
    )
    assert set(Assignment.objects.filter(pk__in=[second.pk, third.pk]).values_list("status", flat=True)) == {
        "expired"
    }


def test_study_form_lists_researchers_and_shows_the_protocol_readably(
    admin_client: Client, owner: User, annotator_user: User
) -> None:
    protocol = load_preset("object-attributes").to_dict()
    protocol["questions"][0]["prompt"] = "<script>alert(1)</script> colour?"
    study = StudyFactory.create(owner=owner, protocol=protocol)
    page = admin_client.get(f"/admin/annotations/study/{study.pk}/change/").content.decode()
    owner_select = re.search(r'<select name="owner"[^>]*>(.*?)</select>', page, re.S)
    assert owner_select is not None
    assert ">owner<" in owner_select.group(1) and annotator_user.username not in owner_select.group(1)
    assert f"<code>{study.protocol_obj.questions[0].key}</code>" in page
    question = next(q for q in study.protocol_obj.questions if q.options)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; colour?" in page and "<script>alert(1)" not in page
    labels = [option.label for option in question.options]
    assert labels and all(label in page for label in labels)
    assert '"questions"' not in page  # no JSON blob


def test_generation_and_labelling_models_are_in_the_admin(admin_client: Client, owner: User) -> None:
    study = StudyFactory.create(owner=owner, name="Gen study")
    GenerationJob.objects.create(
        study=study, name="soda-set", prompts=[{"text": "a"}], model_spec={"source": "m"}, model_label="sd-x"
    )
    LabellingJob.objects.create(study=study, annotator=MachineAnnotatorFactory.create(name="clip-x"))
    for url, shown in [
        ("/admin/generation/generationjob/?q=soda", "sd-x"),
        ("/admin/generation/generationfailure/", "0 generation failures"),
        ("/admin/labelling/labellingjob/?status__exact=pending", "clip-x"),
        ("/admin/labelling/labelattempt/", "0 label attempts"),
        ("/admin/labelling/labelcacheentry/", "Select label cache entry to view"),
    ]:
        response = admin_client.get(url)
        assert response.status_code == 200 and shown in response.content.decode(), url


def test_none_of_it_is_open_to_an_account_that_is_not_staff(annotator_user: User, owner: User) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    study = StudyFactory.create(owner=owner)
    for user in (annotator_user, owner):  # an annotator and a researcher, neither staff
        client = Client()
        client.force_login(user)
        assert client.get(IMPORT_URL)["Location"].startswith("/admin/login/")
        upload = SimpleUploadedFile("p.csv", b"username,email,name\nzed,zed@example.org,Zed\n")
        assert client.post(IMPORT_URL, {"file": upload}).status_code == 302
        enrol = client.post(
            "/admin/annotations/user/",
            {"action": "enrol_in_study", "_selected_action": [user.pk], "apply": "1", "study": study.pk},
        )
        assert enrol.status_code == 302 and enrol["Location"].startswith("/admin/login/")
    assert not User.objects.filter(username="zed").exists() and not Enrollment.objects.exists()
    staff = UserFactory.create(username="clerk", role="annotator", is_staff=True)  # staff without rights
    client = Client()
    client.force_login(staff)
    assert client.get(IMPORT_URL).status_code == 403


@pytest.mark.parametrize(
    "model",
    ["annotations/reveallog", "labelling/labelattempt", "generation/generationfailure"],
)
def test_audit_logs_are_read_only_in_the_admin(admin_client: Client, model: str) -> None:
    """Even a superuser cannot add, change or delete an audit record by hand (issue 36, point 4)."""
    listing = admin_client.get(f"/admin/{model}/")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert f'href="/admin/{model}/add/"' not in page and 'value="delete_selected"' not in page
    assert admin_client.get(f"/admin/{model}/add/").status_code == 403


def test_the_label_cache_can_be_emptied_but_not_written(admin_client: Client) -> None:
    from labelling.models import LabelCacheEntry

    LabelCacheEntry.objects.create(key="k" * 64, raw="{}", model="vlm")  # the list offers actions on rows
    assert admin_client.get("/admin/labelling/labelcacheentry/add/").status_code == 403
    assert 'value="delete_selected"' in admin_client.get("/admin/labelling/labelcacheentry/").content.decode()


def test_every_model_is_named_in_english_in_the_admin() -> None:
    """Django adds an "s" to make a plural: "entrys", "reliabilitys". Every model of the workbench's
    apps reads right (issue 36, point 4)."""
    from django.apps import apps

    wrong = [
        f"{model._meta.label}: {model._meta.verbose_name_plural}"
        for model in apps.get_models()
        if model._meta.app_label in ("annotations", "generation", "labelling", "reports", "mitigation")
        and str(model._meta.verbose_name_plural).endswith(("ys", "ss", "shs", "chs", "xs"))
        and not str(model._meta.verbose_name_plural).endswith(("days", "keys", "ways"))
    ]
    assert wrong == []
