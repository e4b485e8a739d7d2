"""A race in pyiceberg 0.12: one manifest evaluator shared by threads.

pyiceberg's manifest evaluator (``_ManifestEvalVisitor``) keeps the manifest it is looking at
on itself: ``eval`` sets ``self.partition_fields`` to the manifest's partition summaries, then
walks the filter reading them. An overwrite's check of the files it deletes
(``_OverwriteFiles._deleted_entries``) hands one evaluator per spec to a thread pool that
evaluates the parent snapshot's manifests at once, so a thread can read another manifest's
summaries halfway through its filter. A manifest holding a file to delete is then skipped, and
the commit fails: ``ValidationException: Missing required files to delete``. The any-order
histories met it once in a suite run (a table after eight syncs holds a dozen manifests, and
each sync commits four tables in threads); pyiceberg fixed the same race in its partition
evaluator long ago (apache/iceberg-python#115), not in this one.

Each evaluation here works on a shallow copy of the evaluator (its bound filter shared, its
manifest its own): the same answer, nothing shared between threads.

Installed once, by ``install()``, only on the pyiceberg version it was read on (the project pins
it): another version keeps its own behaviour.
"""

from __future__ import annotations

import copy
import importlib.metadata

KNOWN_VERSION = "0.12.0"
_installed = False
pyiceberg_eval = None  # pyiceberg's own ``eval``, once installed (the tests race it)


def install() -> bool:
    """Make ``_ManifestEvalVisitor.eval`` keep no state on the shared evaluator; ``False``
    (nothing changed) on another version of pyiceberg."""
    global _installed, pyiceberg_eval
    if _installed:
        return True
    if importlib.metadata.version("pyiceberg") != KNOWN_VERSION:
        return False
    from pyiceberg.expressions import visitors

    def evaluate(self, manifest) -> bool:
        if partitions := manifest.partitions:
            own = copy.copy(self)  # the bound filter shared; the summaries this call's own
            own.partition_fields = partitions
            return visitors.visit(self.partition_filter, own)
        return visitors.ROWS_MIGHT_MATCH  # no partition information

    pyiceberg_eval = visitors._ManifestEvalVisitor.eval
    visitors._ManifestEvalVisitor.eval = evaluate
    _installed = True
    return True
