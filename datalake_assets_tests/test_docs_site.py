"""The documentation site (``mkdocs.yml``, ``docs/``) builds in strict mode, and its generated
references name everything the code has: every settings key, every ``datalake`` command and
option, every field of the sync report.

One build (about 1-2 s) shared by the tests. The keys, commands and fields are listed here from
the code itself, not by the hook that writes the pages (``docs/hooks/reference_pages.py``).
"""

from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("the docs extra is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(REPO / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, (
        "mkdocs build --strict failed (a broken link or anchor, a page missing from the nav in "
        "mkdocs.yml, or a generated reference that found something undocumented):\n"
        + build.stdout[-4000:]
        + build.stderr[-4000:]
    )
    return out


def _text(path: Path) -> str:
    return html.unescape(path.read_text(encoding="utf-8"))


def _sections(page: str, tag: str) -> dict[str, str]:
    """The page's ``<tag>`` headings' text -> the HTML up to the next heading of that level."""
    parts = re.split(rf"<{tag}\b[^>]*>(.*?)</{tag}>", page, flags=re.DOTALL)
    return {
        re.sub(r"<[^>]+>", "", parts[i]).replace("¶", "").strip(): parts[i + 1]
        for i in range(1, len(parts) - 1, 2)
    }


def _settings_tables() -> dict[str, list[str]]:
    """Table ("" for the top level, "sources", "spark", ...) -> the keys a settings file may
    hold there, from the settings models."""
    from datalake_assets.settings import LakeSettings
    from datalake_assets.settings.fields import file_keys

    def model_of(annotation):
        candidates = (annotation, *getattr(annotation, "__args__", ()))
        return next((c for c in candidates if getattr(c, "__pydantic_fields__", None)), None)

    out: dict[str, list[str]] = {}

    def walk(cls, table: str) -> None:
        allowed = set(file_keys(cls))
        for name, field in cls.__pydantic_fields__.items():
            key = field.alias or name
            if key not in allowed:
                continue
            model = model_of(field.annotation)
            if model is not None:
                walk(model, f"{table}.{key}" if table else key)
            else:
                out.setdefault(table, []).append(key)

    walk(LakeSettings, "")
    return out


def test_the_site_builds_strict_with_every_page(site):
    for page in (
        "index.html",
        "reference/settings/index.html",
        "reference/cli/index.html",
        "reference/sync-report/index.html",
        "get-started/local/index.html",
    ):
        assert (site / page).exists(), page
    for md in (REPO / "docs").rglob("*.md"):
        rel = md.relative_to(REPO / "docs").with_suffix("")
        built = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert built.exists(), f"docs/{md.relative_to(REPO / 'docs')} was not built"


def test_the_settings_reference_has_every_key(site):
    page = _text(site / "reference/settings/index.html")
    sections = _sections(page, "h2")
    tables = _settings_tables()
    assert {"", "sources", "spark", "catalog"} <= set(tables)
    for table, keys in tables.items():
        title = (
            "Top level"
            if not table
            else next((t for t in (f"[[{table}]]", f"[{table}]") if t in sections), None)
        )
        assert title in sections, f"no section for [{table}] in the settings reference"
        for key in keys:
            assert f"<code>{key}</code>" in sections[title], f"[{table}] {key} is not documented"
    import importlib
    import pkgutil

    from datalake_assets import settings

    modules = [settings] + [
        importlib.import_module(f"{settings.__name__}.{m.name}")
        for m in pkgutil.iter_modules(settings.__path__)
    ]
    variables = {v for mod in modules for k, v in vars(mod).items() if k.startswith("ENV_")}
    for variable in variables:
        assert variable in sections["Environment variables"], variable


def _commands(parser: argparse.ArgumentParser, prefix: str = "datalake"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def test_the_cli_reference_has_every_command_and_option(site):
    from datalake_assets.cli_parser import build_parser

    page = _text(site / "reference/cli/index.html")
    commands = list(_commands(build_parser()))
    assert {"datalake dev", "datalake sync", "datalake catalog init-metastore"} <= {
        c for c, _ in commands
    }
    for command, parser in commands:
        anchor = command.replace(" ", "-")
        start = page.find(f'id="{anchor}"')
        assert start >= 0, f"`{command}` is not in the CLI reference"
        end = min(
            (i for i in (page.find('id="datalake-', start + len(anchor) + 5),) if i >= 0),
            default=len(page),
        )
        section = page[start:end]
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}</code>" in section, f"{command} {option}"


def test_the_sync_report_reference_has_every_field(site):
    from datalake_assets.lake.report import SourceReport, TableReport

    sections = _sections(_text(site / "reference/sync-report/index.html"), "h2")
    table_row = next(v for k, v in sections.items() if k.startswith("A table"))
    source_row = next(v for k, v in sections.items() if k.startswith("The source"))
    for fields, section in ((TableReport._ORDER, table_row), (SourceReport._ORDER, source_row)):
        for name in fields:
            assert f"<code>{name}</code>" in section, name
