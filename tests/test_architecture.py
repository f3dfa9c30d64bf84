"""The layout's rules, checked on the source (docs/architecture.md says why each rule exists).

Every import counts, including the ones inside functions: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "workbench",
    "common",
    "metrics",
    "protocols",
    "annotations",
    "findings",
    "generation",
    "labelling",
    "mitigation",
    "reports",
)
# Which top-level packages each package may import (besides itself and third-party libraries).
MAY_IMPORT = {
    "metrics": set(),
    "common": set(),
    # A study's questions (schema, presets, answer checks): no models, no app below but common.
    "protocols": {"common"},
    "annotations": {"protocols", "common", "metrics"},
    # The papers' findings, comparison and figures read the annotations app; it never reads them.
    "findings": {"annotations", "protocols", "common", "metrics"},
    "generation": {"annotations", "protocols", "common", "metrics"},
    "labelling": {"annotations", "protocols", "common", "metrics"},
    "mitigation": {"generation", "labelling", "findings", "annotations", "protocols", "common", "metrics"},
    # The audit report reads every app's records (study, generation provenance, labelling cost).
    "reports": {
        "mitigation",
        "generation",
        "labelling",
        "findings",
        "annotations",
        "protocols",
        "common",
        "metrics",
    },
    "workbench": {
        "protocols",
        "reports",
        "mitigation",
        "findings",
        "annotations",
        "generation",
        "labelling",
        "common",
        "metrics",
    },
}
# Modules below ``workbench`` that compose apps the way it does (docs/architecture.md): none.
COMPOSITION_POINTS: dict[str, set[str]] = {}
PAGE_MODULES = {
    "annotations.views.studies.create",
    "annotations.views.studies.detail",
    "annotations.views.studies.exports",
    "annotations.views.studies.imports",
    "annotations.views.studies.items",
    "annotations.views.studies.people",
    "annotations.views.annotate",
    "annotations.views.agreement",
    "findings.views.compare",
    "findings.views.findings",
    "annotations.views.invitations",
    "annotations.views.join",
    "annotations.views.progress",
    "annotations.views.quality",
    "generation.views",
    "labelling.views",
    "mitigation.views",
    "reports.views",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _imports(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in out if m.split(".")[0] in PACKAGES}


MODULES = _modules()
GRAPH = {
    name: {m for m in _imports(path, name) if m in MODULES and m != name} for name, path in MODULES.items()
}


def test_packages_import_only_the_layers_below_them() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        top = name.split(".")[0]
        allowed = MAY_IMPORT[top] | {top} | COMPOSITION_POINTS.get(name, set())
        wrong += [f"{name} imports {t}" for t in sorted(targets) if t.split(".")[0] not in allowed]
    assert wrong == []


def test_no_page_imports_another_page_or_the_api_and_no_command_is_imported() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        for target in targets:
            if name in PAGE_MODULES and target in PAGE_MODULES:
                wrong.append(f"page {name} imports page {target}")
            if ".api." in f".{target}." and ".api." not in f".{name}." and not name.endswith("urls"):
                wrong.append(f"{name} imports the API module {target}")
            if ".views" in target and not (
                name.endswith("urls") or ".views" in name or name.startswith("workbench")
            ):
                wrong.append(f"{name} imports the page module {target}")
            if ".management.commands." in target:
                wrong.append(f"{name} imports the command {target}")
    assert wrong == []


def test_services_and_selectors_stay_below_pages_and_tasks() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        if ".services" in name or ".selectors" in name or name.endswith(("access", "models")):
            wrong += [
                f"{name} imports {t}"
                for t in targets
                if any(part in t.split(".") for part in ("views", "api", "tasks", "urls", "management"))
            ]
        if ".selectors" in name:
            wrong += [f"selector {name} imports the service {t}" for t in targets if ".services" in t]
    assert wrong == []


# The services that read files through a format adapter: none (imports are adapters above them).
SERVICES_USING_INTERCHANGE: set[str] = set()


def test_format_adapters_sit_between_the_pages_and_the_services() -> None:
    """``annotations/interchange/`` writes through the services; the services, selectors and models
    never read through it (but the named ones), and it never imports pages, the API, tasks or commands."""
    wrong = []
    for name, targets in GRAPH.items():
        # The file source sits below the adapters: any service may read files through it.
        into = [
            t
            for t in targets
            if t.startswith("annotations.interchange") and not t.startswith("annotations.interchange.sources")
        ]
        if ".interchange" in name:
            wrong += [
                f"{name} imports {t}"
                for t in targets
                if any(part in t.split(".") for part in ("views", "api", "tasks", "urls", "management"))
            ]
        elif (
            name.startswith("annotations.")
            and (
                ".services" in name
                or ".selectors" in name
                or ".protocols" in name
                or name.endswith(("access", "models"))
            )
            and name not in SERVICES_USING_INTERCHANGE
        ):
            wrong += [f"{name} imports the format adapter {t}" for t in into]
    assert wrong == []


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    # A package's __init__ importing its own modules is not a circle worth reporting.
    assert [
        c for c in _cycles() if not all(m.startswith(c[0].split(".")[0]) and m.count(".") == 0 for m in c)
    ] == []


@pytest.mark.parametrize("doc", ["docs/architecture.md"])
def test_every_path_the_map_names_exists(doc: str) -> None:
    text = (ROOT / doc).read_text()
    named = set(
        re.findall(
            r"`((?:workbench|common|metrics|annotations|generation|labelling|mitigation|templates|tests|static|docs)"
            r"/[\w/.-]*)`",
            text,
        )
    )
    assert named, "the map names no path"
    missing = sorted(p for p in named if "*" not in p and "<" not in p and not (ROOT / p).exists())
    assert missing == []


def test_the_map_names_every_package() -> None:
    text = (ROOT / "docs/architecture.md").read_text()
    packages = defaultdict(list)
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name.count(".") <= 1 and not name.endswith("management"):
            packages[name.split(".")[0]].append(name)
    unnamed = [
        name for names in packages.values() for name in names if f"`{name.replace('.', '/')}/`" not in text
    ]
    assert unnamed == []


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in helpers (tests/helpers.py, tests/*/builders.py, conftest fixtures)."""
    wrong = []
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                if any(n.rsplit(".", 1)[-1].startswith("test_") or n.endswith("conftest") for n in names):
                    wrong.append(f"{path.relative_to(ROOT)} imports {node.module}")
    assert wrong == []


def test_templates_mirror_the_page_modules() -> None:
    """A page module renders templates from ``templates/<its area>/`` (shared: errors/, registration/):
    its name below ``views`` (``annotations.views.quality``), the package below ``views`` that holds it
    (``annotations.views.studies.items``), or its app (``generation.views``)."""
    wrong = []
    for name in sorted(PAGE_MODULES | {"workbench.views"}):
        parts = name.split(".")
        area = parts[parts.index("views") + 1] if ".views." in name else parts[0]
        for template in re.findall(r"\"([\w/]+)\.html\"", MODULES[name].read_text()):
            folder = template.split("/")[0]
            if folder not in (area, "errors") or not (ROOT / "templates" / f"{template}.html").exists():
                wrong.append(f"{name} renders {template}.html")
    assert wrong == []


def test_selectors_build_no_urls() -> None:
    """A read answers with data; the page or the API makes URLs of it (``annotations/presenters.py``)."""
    wrong = []
    for name, path in MODULES.items():
        if ".selectors" not in f".{name}" and not name.endswith(".selectors"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in ("django.urls", "annotations.presenters"):
                wrong.append(f"{name} imports {node.module}")
            if isinstance(node, ast.Import) and any(alias.name == "django.urls" for alias in node.names):
                wrong.append(f"{name} imports django.urls")
    assert wrong == []


READS = {
    "adjudication_queue",
    "control_plan",
    "control_candidate",
    "invitation_state",
    "reveal_enabled",
    "launch_refusal",
}


def test_reads_live_in_selectors_not_in_services() -> None:
    """Functions that only read (the claim's control plan, the adjudication queue, a link's state...)
    are selectors; services import them from there (docs/architecture.md)."""
    where: dict[str, list[str]] = defaultdict(list)
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in READS:
                where[node.name].append(name)
    assert {read: sorted(where[read]) for read in READS} == {
        read: [m for m in sorted(where[read]) if ".selectors" in m] or ["(missing)"] for read in READS
    }


def test_no_page_module_draws() -> None:
    """Figures are drawn in ``findings/figures.py`` (shared by pages, exports and the audit report):
    no module under a ``views`` package imports matplotlib."""
    wrong = []
    for name, path in MODULES.items():
        if ".views." not in f".{name}.":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            wrong += [f"{name} imports {n}" for n in names if n.split(".")[0] == "matplotlib"]
    assert wrong == []


# The longest a function may be: past it, a reader loses the thread (split it into named steps).
MAX_FUNCTION_LINES = 150


def test_no_function_is_longer_than_a_reader_can_follow() -> None:
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert long == []


def test_no_app_holds_half_of_the_house() -> None:
    """The largest app (annotations) stays under half of the code's lines (migrations not counted):
    a wing with its own vocabulary gets its own app, as the findings did."""
    lines: dict[str, int] = defaultdict(int)
    for name, path in MODULES.items():
        lines[name.split(".")[0]] += len(path.read_text().splitlines())
    total = sum(lines.values())
    assert {top: n for top, n in lines.items() if n * 2 >= total} == {}


def test_the_module_index_of_the_map_is_generated_from_the_code() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "architecture_index", ROOT / "scripts/architecture_index.py"
    )
    assert spec is not None and spec.loader is not None
    index = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(index)
    text = (ROOT / "docs/architecture.md").read_text()
    assert index.replaced(text) == text, "run: .venv/bin/python scripts/architecture_index.py --write"


def test_every_package_is_type_checked() -> None:
    """mypy checks the files pyproject.toml lists: a new app left out would never be type-checked."""
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert [package for package in PACKAGES if package not in listed] == []
