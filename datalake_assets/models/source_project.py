"""One source's assembled dbt project (``workspace.py`` assembles it): where it is and what dbt
needs to run it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceProject:
    """One source's assembled dbt project."""

    slug: str
    project_dir: str
    profiles_dir: str
    target: str

    @property
    def manifest_path(self) -> str:
        return os.path.join(self.project_dir, "target", "manifest.json")

    @property
    def dbt_args(self) -> list[str]:
        """The options of a dbt command run on this project: its folder, profiles and target."""
        return [
            "--project-dir",
            self.project_dir,
            "--profiles-dir",
            self.profiles_dir,
            "--target",
            self.target,
        ]

    def model_names(self) -> list[str]:
        """The project's models that are tables (not ephemeral), from its parsed manifest."""
        with open(self.manifest_path, "rb") as f:
            nodes = json.load(f)["nodes"]
        return sorted(
            n["name"]
            for n in nodes.values()
            if n["resource_type"] == "model" and n["config"].get("materialized") != "ephemeral"
        )
