"""The reproducibility appendix: which workbench and packages made the report and the sha256 of the study's
JSONL export taken in the same transaction as the numbers. The commands that recompute each number
(``commands``) go to the supplement's README (``reports/supplement.py``): a paper's appendix names what
was run, not how to type it."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from django.conf import settings

from annotations.interchange.exports import export_jsonl
from annotations.models import Study
from reports.document import Facts, Paragraph, Section

PACKAGES = ("django", "numpy", "scipy", "krippendorff", "torch", "diffusers", "transformers", "matplotlib")


def workbench_version() -> str:
    """The version pyproject.toml gives the workbench."""
    data = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text(encoding="utf-8"))
    return str(data.get("project", {}).get("version", "unknown"))


def _git(*args: str) -> str | None:
    """What ``git ARGS`` prints in the checkout, None where git or the repository is missing."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> str:
    """The checkout's commit (``git rev-parse HEAD``), saying so when tracked files changed since;
    "unknown" where there is no git or repository."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return "unknown"
    return (
        f"{commit} (with uncommitted changes)"
        if _git("status", "--porcelain", "--untracked-files=no")
        else commit
    )


def package_versions() -> list[tuple[str, str]]:
    """(package, version or "not installed") for each package the numbers or images depend on."""
    found = []
    for name in PACKAGES:
        try:
            found.append((name, version(name)))
        except PackageNotFoundError:
            found.append((name, "not installed"))
    return found


def export_sha256(study: Study) -> str:
    """The sha256 of the study's JSONL export (``manage.py export STUDY --format jsonl``), UTF-8."""
    digest = hashlib.sha256()
    for line in export_jsonl(study):
        digest.update(line.encode("utf-8"))
    return digest.hexdigest()


def commands(study: Study, source: str, correction: str) -> list[str]:
    """The manage.py commands that recompute each part of the report."""
    sid = study.pk
    return [
        f"python manage.py export {sid} --format jsonl   (the export whose sha256 Reproducibility gives)",
        f"python manage.py metrics {sid} --json --source {source}   (Findings)",
        f"python manage.py agreement {sid} --json   (Agreement; Machine vs human)",
        f"python manage.py quality {sid} --json   (People: pools, gold, attention, exclusions)",
        f"python manage.py payments {sid}   (People: items and time on task)",
        f"python manage.py report {sid} --format md --source {source} --correction {correction}"
        "   (this report)",
    ]


def appendix_section(study: Study, *, source: str, correction: str, generated_at: str) -> Section:
    """The reproducibility appendix of ``study``'s report."""
    pairs = [
        ("Generated at (UTC)", generated_at),
        ("Workbench version", workbench_version()),
        ("Git commit", git_commit()),
        *((f"{name} version", v) for name, v in package_versions()),
        ("sha256 of the JSONL export", export_sha256(study)),
    ]
    return Section(
        key="reproducibility",
        title="Reproducibility",
        blocks=[
            Facts(pairs=pairs),
            Paragraph(
                "The report's supplement holds every findings table as a CSV file; its README.txt names each "
                "file and lists the workbench commands that recompute each section of this report from the "
                "export above."
            ),
        ],
    )
