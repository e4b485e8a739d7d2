"""Test support only: a process started with this folder first on ``PYTHONPATH`` and
``DATALAKE_TEST_HNS_ROOT`` set resolves ``abfss://`` locations to the hierarchical-namespace
emulation in that folder. Spark's Python workers inherit the environment, so a whole sync (its
driver and its workers) runs on the emulation. Without the variable it does nothing."""

import os

if os.environ.get("DATALAKE_TEST_HNS_ROOT"):
    from datalake_assets_tests.azure.hns_emulation import install_from_environment

    install_from_environment()
