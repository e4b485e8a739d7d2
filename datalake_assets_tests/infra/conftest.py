from typing import Any

import pytest


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    """The module's *.tf files merged: resources and data sources keyed "type.name",
    variables, outputs and locals by name."""
    from datalake_assets_tests.infra.terraform import parse_module

    return parse_module()
