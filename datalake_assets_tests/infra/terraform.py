"""The Terraform module in infra/ for the tests: its paths, and its *.tf files parsed (python-hcl2).

Importing this module skips the importing test module when python-hcl2 is missing (locally; under
CI it fails: it is a test dependency)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
AZURE = INFRA / "azure"  # the Azure variant's module
ALL_FEATURES_TFVARS = INFRA / "tests" / "all-features.tfvars"
BOOTSTRAP = INFRA / "bootstrap" / "install-python-deps.sh"
IN_CI = bool(os.environ.get("CI"))

CHECKOV_INSTALL = "python3 -m venv .venv-iac && .venv-iac/bin/pip install -q 'checkov==3.3.30'"

try:
    import hcl2
except ImportError:  # pragma: no cover - depends on the environment
    if IN_CI:
        raise RuntimeError(
            "python-hcl2 is missing: it is a test dependency (pyproject [test])"
        ) from None
    pytest.skip("python-hcl2 is not installed (pip install -e '.[test]')", allow_module_level=True)


def _unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals and block labels ('"x"'); older
    versions drop them. Strip them recursively and drop the parser's markers."""
    if isinstance(value, str):
        return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, dict):
        return {
            _unquote(k): _unquote(v)
            for k, v in value.items()
            if k not in ("__is_block__", "__comments__", "__inline_comments__")
        }
    return value


def parse_module(directory: Path = INFRA) -> dict[str, Any]:
    """The module's *.tf files merged: resources and data sources keyed "type.name",
    variables, outputs and locals by name."""
    merged: dict[str, Any] = {
        "resource": {},
        "data": {},
        "variable": {},
        "output": {},
        "locals": {},
    }
    files = sorted(directory.glob("*.tf"))
    assert files, f"no Terraform files in {directory}"
    for path in files:
        with path.open(encoding="utf-8") as handle:
            parsed = _unquote(hcl2.load(handle))
        for kind in ("resource", "data"):
            for block in parsed.get(kind, []):
                for rtype, named in block.items():
                    for name, body in named.items():
                        key = f"{rtype}.{name}"
                        assert key not in merged[kind], f"{kind} {key} declared twice"
                        merged[kind][key] = body
        for kind in ("variable", "output"):
            for block in parsed.get(kind, []):
                for name, body in block.items():
                    assert name not in merged[kind], f"{kind} {name} declared twice"
                    merged[kind][name] = body
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
    return merged
