"""The package's layers, checked on the source: every import, at module level or inside a
function, points down (or sideways within a layer), never up; and no import cycles.

    rules (spec, plans)  <-  lake I/O (lake)  <-  settings  <-  catalog  <-  sync job (transform)
                                                            <-  ingest (collector, importer, demo)
    <-  privacy  <-  models (dbt)  <-  Dagster wiring (orchestration, definitions)  <-  cli

docs/architecture.md draws the same picture and says what each layer holds.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import datalake_assets

PACKAGE = Path(datalake_assets.__file__).parent
ROOT = "datalake_assets"

# layer -> the layers it may import (itself included). Order = bottom to top.
LAYERS: dict[str, set[str]] = {
    "rules": {"rules"},
    "lake": {"rules", "lake"},
    "settings": {"rules", "settings"},
    "catalog": {"rules", "lake", "settings", "catalog"},
    "sync": {"rules", "lake", "settings", "catalog", "sync"},
    "ingest": {"rules", "lake", "settings", "ingest"},
    # ingest: the collector's own spool eraser (privacy/forget_steps.py's ``_erase_spool``)
    "privacy": {"rules", "lake", "settings", "catalog", "ingest", "privacy"},
    # the dbt models: assembled, run on the platform's Spark (sync's session), brought to an
    # erasure (privacy's request state)
    "models": {"rules", "lake", "settings", "catalog", "sync", "ingest", "privacy", "models"},
    "dagster": {
        "rules",
        "lake",
        "settings",
        "catalog",
        "sync",
        "ingest",
        "privacy",
        "models",
        "dagster",
    },
    "app": {
        "rules",
        "lake",
        "settings",
        "catalog",
        "sync",
        "ingest",
        "privacy",
        "models",
        "dagster",
        "app",
    },
}
# The sync talks to a catalog through its interface and factory, not a backend's internals:
# the schemas read before casting (register.read_schemas), then the catalog step
# (catalog/step.py: prepare, register_and_check, record_report).
SYNC_MAY_IMPORT_OF_CATALOG = {
    "datalake_assets.catalog",
    "datalake_assets.catalog.catalog_interface",
    "datalake_assets.catalog.config",
    "datalake_assets.catalog.register",
    "datalake_assets.catalog.step",
}
# Third-party packages a layer may not import at all.
FORBIDDEN_THIRD_PARTY = {
    "rules": {"dagster", "pyspark", "boto3"},
    "lake": {"dagster", "pyspark"},
    "settings": {"dagster", "pyspark", "boto3", "pyarrow", "duckdb", "pyiceberg"},
    "catalog": {"dagster"},
    "sync": {"dagster"},
    "ingest": {"dagster", "pyspark"},
    "privacy": {"dagster", "pyspark"},
    "models": {"dagster"},
}
# Dagster's private modules: one import in each of two places, each because Dagster 1.13
# exports the class nowhere else: the definitions load context (definitions.py says why), and
# the target materialization of a check evaluation (orchestration/sync/sync_checks.py: the UI
# counts an hour's check result only when it targets the hour's latest materialization).
PRIVATE_DAGSTER_ALLOWED = {
    "datalake_assets.definitions",
    "datalake_assets.orchestration.sync.sync_checks",
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    sub = parts[1] if len(parts) > 1 else ""
    if sub in ("", "spec", "plans"):  # the package's own __init__ is empty; plans: pure too
        return "rules"
    if sub == "settings":  # the settings/ package: every section's model, the loader
        return "settings"
    if sub == "lake":
        return "lake"
    if sub == "catalog":
        return "catalog"
    if sub == "transform":
        return "sync"
    if sub == "ingest":
        return "ingest"
    if sub == "privacy":
        return "privacy"
    if sub == "models":
        return "models"
    if sub in ("orchestration", "definitions"):
        return "dagster"
    if sub in (
        "cli",
        "cli_parser",
        "cli_forget",
        "cli_catalog",
        "cli_status",
        "cli_collect",
        "cli_convert",
        "cli_batches",
        "cli_demo",
        "cli_plan",
    ):
        return "app"
    raise AssertionError(f"{module}: no layer; add it to layer_of() and docs/architecture.md")


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, wherever it sits. ``from a
    import b`` yields ``a.b`` when that is a module of ours, else ``a``."""
    ours = MODULES
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                base = module.split(".")[
                    : -node.level + (1 if path.name == "__init__.py" else 0) or None
                ]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if sub in ours else target))
    return found


@functools.cache
def module_level_imports(module: str, path: Path) -> list[tuple[int, str]]:
    """The imports that run when the module is imported: ``imports_of`` minus those inside a
    function (which run when it is called)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for n in ast.walk(f)
    }
    lines = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt) and id(n) not in skipped}
    return [(line, target) for line, target in imports_of(module, path) if line in lines]


def packages_run_by(target: str) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` executes: each enclosing one
    (``a.b.c`` runs ``a`` and ``a.b``), and ``target`` itself if it is a package."""
    parts = target.split(".")
    found = [".".join(parts[:i]) for i in range(1, len(parts))]
    if target in MODULES and MODULES[target].name == "__init__.py":
        found.append(target)
    return [p for p in found if p in MODULES]


def imports_with_inits(module: str, path: Path) -> list[tuple[int, str, str | None]]:
    """(line, imported module, via): the module's own imports (``via`` None), and what the
    package ``__init__`` files they execute import at module level (``via``: that package;
    the line is the module's import that runs it, 0 for the module's own packages), followed
    through the packages those imports execute in turn."""
    found: list[tuple[int, str, str | None]] = []
    done: set[str] = set()

    def run_inits(line: int, target: str) -> None:
        for package in packages_run_by(target):
            if package in done:
                continue
            done.add(package)
            for _, sub in module_level_imports(package, MODULES[package]):
                found.append((line, sub, package))
                if sub.split(".")[0] == ROOT:
                    run_inits(line, sub)

    run_inits(0, module)
    for line, target in imports_of(module, path):
        found.append((line, target, None))
        if target.split(".")[0] == ROOT:
            run_inits(line, target)
    return found


MODULES = modules()


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    layer = layer_of(module)
    wrong = []
    for line, target, via in imports_with_inits(module, MODULES[module]):
        top = target.split(".")[0]
        how = f" (run by {via}'s __init__)" if via else ""
        if top == ROOT:
            if target == ROOT:
                continue
            their = layer_of(target)
            if their not in LAYERS[layer]:
                wrong.append(f"line {line}: {target} ({their}) from the {layer} layer{how}")
            if (
                via is None  # what the sync's code names, not what a package's __init__ does
                and layer == "sync"
                and their == "catalog"
                and target not in SYNC_MAY_IMPORT_OF_CATALOG
            ):
                wrong.append(
                    f"line {line}: {target}: the sync uses catalog.catalog_interface/config/"
                    "register/step, not a backend's internals"
                )
        elif top in FORBIDDEN_THIRD_PARTY.get(layer, ()):
            wrong.append(f"line {line}: {target} may not be imported by the {layer} layer{how}")
        if target.startswith("dagster._") and module not in PRIVATE_DAGSTER_ALLOWED:
            wrong.append(f"line {line}: {target} is Dagster's private API")
    assert not wrong, f"{module}:\n  " + "\n  ".join(wrong)


def test_no_import_cycles():
    graph = {
        m: {t for _, t in imports_of(m, p) if t in MODULES and t != m} for m, p in MODULES.items()
    }
    # A package imports its own __init__ implicitly; edges into a package's __init__ from its
    # own modules are not cycles of ours unless __init__ imports them back.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_no_lazy_module_attributes():
    """No ``__getattr__`` loaders that hide what a package imports."""
    lazy = [
        m
        for m, p in MODULES.items()
        if any(
            isinstance(n, ast.FunctionDef) and n.name == "__getattr__"
            for n in ast.parse(p.read_text()).body
        )
    ]
    assert not lazy


def test_the_check_catches_a_wrong_import(tmp_path):
    """The checker itself: an upward import inside a function is found."""
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from datalake_assets.transform import job\n")
    assert (2, "datalake_assets.transform.job") in imports_of("datalake_assets.spec.x", bad)
    assert "sync" not in LAYERS[layer_of("datalake_assets.spec.x")]


def test_the_check_follows_package_inits(tmp_path):
    """Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py``: what they import
    at module level is checked as the importer's (lake/formats/__init__.py imports format_interface.py,
    which imports pyarrow: a settings module importing lake.formats.<anything> is refused)."""
    mod = tmp_path / "x.py"
    mod.write_text("from datalake_assets.lake.formats import segment\n")
    found = imports_with_inits("datalake_assets.settings.x", mod)
    assert (
        1,
        "datalake_assets.lake.formats.format_interface",
        "datalake_assets.lake.formats",
    ) in found
    assert "lake" not in LAYERS[layer_of("datalake_assets.settings.x")]
    # an import inside the __init__'s function runs only when it is called: not followed
    assert all(t != "datalake_assets.lake.formats.iceberg" for _, t, via in found if via)


DATA_LIBRARIES = ("pyarrow", "pyspark", "duckdb", "pyiceberg", "dagster", "boto3", "pandas")


def test_importing_the_settings_imports_no_data_library():
    """``datalake_assets.settings`` (every section, the loader) is pydantic and the standard
    library: the CLI, the collector and the job's argv parsing load it cheaply. Checked in a
    fresh interpreter, whatever the test process has imported already."""
    code = (
        "import sys, datalake_assets.settings, pkgutil, importlib\n"
        "for m in pkgutil.iter_modules(datalake_assets.settings.__path__):\n"
        "    importlib.import_module('datalake_assets.settings.' + m.name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({DATA_LIBRARIES!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_module_names_are_unique():
    """No two modules (``__init__`` aside) share a file name: a name says which module it is,
    in a traceback, an import line or a search, without its folder."""
    seen: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(name)
    assert not {n: ms for n, ms in seen.items() if len(ms) > 1}


# Size is a question for a reviewer, not a wall: a module past ~400 lines (or a phase of the
# sync past ~60) usually holds two concepts and should be split by concept; squeezing it under
# a number (folding calls, trimming the comments that say why) hides that question. So these
# two report as warnings in pytest's summary, with the figures, and never fail the suite.
MAX_MODULE_LINES = 400
MAX_PHASE_LINES = 60


class SizeWarning(UserWarning):
    """A module or a sync phase past its size: read it, and split it by concept if it holds
    two."""


def test_modules_fit_in_a_head():
    long = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    for m, n in sorted(long.items(), key=lambda mn: -mn[1]):
        warnings.warn(f"{m}: {n} lines (over {MAX_MODULE_LINES})", SizeWarning, stacklevel=1)


def test_the_sync_reads_as_named_phases():
    """Every function of the Spark job (``transform/``) is at most ~60 lines, or warned of."""
    for m, p in MODULES.items():
        if layer_of(m) != "sync":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_PHASE_LINES:
                    warnings.warn(f"{m}.{node.name}: {n} lines", SizeWarning, stacklevel=1)


# The table format is one seam (lake/formats/format_interface.py): the sync, erasure, checks, Dagster and
# the CLI use the factory and the interface; only lake/formats/ knows an implementation (and
# pyiceberg). One table-hour's files are listed through the interface
# (lake.formats.table_hour_files), the catalog's Segment-layout registration's too.
FORMAT_IMPLEMENTATIONS = {
    "datalake_assets.lake.formats.iceberg",
    "datalake_assets.lake.formats.iceberg_catalog",
    "datalake_assets.lake.formats.iceberg_compact",
    "datalake_assets.lake.formats.iceberg_files",
    "datalake_assets.lake.formats.iceberg_schema",
    "datalake_assets.lake.formats.iceberg_staged",
    "datalake_assets.lake.formats.segment",
}


def test_the_table_format_is_one_seam():
    wrong = []
    for module, path in MODULES.items():
        if module.startswith("datalake_assets.lake.formats"):
            continue
        for line, target in imports_of(module, path):
            if target.split(".")[0] == "pyiceberg":
                wrong.append(f"{module} line {line}: pyiceberg outside lake/formats/")
            elif target in FORMAT_IMPLEMENTATIONS:
                wrong.append(f"{module} line {line}: {target} (use lake.formats' interface)")
    assert not wrong, "\n".join(wrong)
