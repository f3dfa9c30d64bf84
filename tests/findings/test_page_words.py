"""Words a person reads on the findings and compare pages: beside each aligned table, which side's
findings read a question its people do not agree on (the reliability gate of that side's table); the
validation sample form's labellers by name and version."""

from __future__ import annotations

import pytest

from annotations.models import User
from findings.comparison import ComparisonSide, comparison_report
from tests.annotations.builders import reliability_study

pytestmark = pytest.mark.django_db


def test_each_side_with_an_unreliable_question_is_named_beside_the_aligned_table(owner: User, client) -> None:
    study = reliability_study(owner)  # gender answered at random by 3 people: alpha near 0
    comparison = comparison_report(
        sides=[ComparisonSide(study=study), ComparisonSide(study=study, source="vlm@1")], cached=False
    )
    tables = {t["key"]: t for t in comparison["tables"]}
    warned = tables["biasconnect_deviation"]["warnings"]
    # Side A reads people's labels (gated); side B a machine's, which carries no human reliability.
    assert [w["side"] for w in warned] == ["A"]
    assert "gender (alpha" in warned[0]["warning"] and "unreliable" in warned[0]["warning"]
    client.force_login(owner)
    page = client.get(f"/compare/?study={study.pk}&study={study.pk}&source=consensus&source=vlm@1")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<strong>Study A:</strong> Reads labels people do not agree on reliably: gender" in html
    assert "<strong>Study B:</strong>" not in html


def test_the_sample_form_names_labellers_in_words(owner: User, client) -> None:
    study = reliability_study(owner)
    client.force_login(owner)
    html = client.get(f"/studies/{study.pk}/findings/").content.decode()
    # The value the form sends stays name@version; a person reads the name and version.
    assert '<select id="sample-labeller" name="labeller"><option value="vlm@1">vlm v1</option>' in html


def test_the_page_notes_say_no_query_string_or_command_flag(owner: User, client) -> None:
    import html as html_lib
    import re

    study = reliability_study(owner)
    client.force_login(owner)
    page = html_lib.unescape(client.get(f"/studies/{study.pk}/findings/").content.decode())
    notes = re.findall(r'<p class="note" id="(?:source|correction)-note">(.*?)</p>', page, flags=re.S)
    assert notes, "no source or correction note on the page"
    notes = [re.sub(r"<[^>]+>", "", note) for note in notes]  # the words, not the links' addresses
    for note in notes:
        assert not re.search(r"\?[a-z_]+=|--[a-z]|manage\.py|page and API", note), note
    # The API keeps the notes whole for its users (they switch by query string).
    api = client.get(f"/api/studies/{study.pk}/metrics/").json()
    assert "?source=NAME" in api["source_note"]
    # What the page still says: where the labels come from, the sentence after the dropped clause
    # capitalised.
    assert notes[0].startswith("Labels from") and ". Sources with labels now: consensus" in notes[0]


def test_a_chosen_sources_note_keeps_the_default_and_why(owner: User, client) -> None:
    """With another source than the protocol's default, the page still says which the default is and
    why; only the clause about switching by query string or flag goes."""
    import html as html_lib
    import re

    study = reliability_study(owner)
    client.force_login(owner)
    page = html_lib.unescape(client.get(f"/studies/{study.pk}/findings/?source=vlm@1").content.decode())
    note = re.sub(
        r"<[^>]+>", "", re.search(r'<p class="note" id="source-note">(.*?)</p>', page, re.S).group(1)
    )
    note = " ".join(note.split())
    assert note.startswith("Labels from vlm@1, as chosen; the default for"), note
    assert " is consensus: " in note and note.count("(") == note.count(")"), note
    assert "Sources with labels now:" in note and "?source=" not in note and "--source" not in note
