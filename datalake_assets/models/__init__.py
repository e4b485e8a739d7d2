"""The dbt models on the lake (``docs/concepts/models.md``): sessions, identity graph, users, daily
counts, and the user's own models, built on the platform's Spark in the lake's catalog.

``project/`` is the shipped dbt project; ``workspace.py`` assembles and parses one project per
source; ``engine.py`` says which Spark dbt reaches; ``erasure.py`` brings a privacy request to
the models. No Dagster here: ``orchestration/dbt/model_assets.py`` wires them as assets.
"""
