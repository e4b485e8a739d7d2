"""Write requirements.lock from a pip installation report: every package pip resolved for the
project, pinned to its version and the sha256 of the file pip chose (``pip install
--require-hashes`` then refuses any other file). The project itself is left out: the image
installs it from its own source, without dependencies.

    pip install --dry-run --ignore-installed --quiet --report report.json .
    python infra/docker/lock_from_report.py report.json > infra/docker/requirements.lock
"""

from __future__ import annotations

import json
import sys

HEADER = """\
# The image's dependencies (infra/docker/Dockerfile), resolved for Python 3.11 on Linux x86_64
# from pyproject.toml's [project] dependencies, each pinned with its hash. Regenerate:
#   pip install --dry-run --ignore-installed --quiet --report report.json .
#   python infra/docker/lock_from_report.py report.json > infra/docker/requirements.lock
"""


def lock_lines(report: dict) -> list[str]:
    rows = []
    for item in report["install"]:
        name, version = item["metadata"]["name"].lower(), item["metadata"]["version"]
        info = item.get("download_info", {})
        if "dir_info" in info:  # the project itself, from its folder
            continue
        archive = info.get("archive_info", {})
        digest = archive.get("hashes", {}).get("sha256")
        if not digest and archive.get("hash", "").startswith("sha256="):
            digest = archive["hash"].split("=", 1)[1]
        if not digest:
            raise SystemExit(f"{name}=={version}: the report has no sha256 for it")
        rows.append(f"{name}=={version} \\\n    --hash=sha256:{digest}\n")
    return sorted(rows)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        sys.stdout.write(HEADER + "".join(lock_lines(json.load(f))))
