"""Catalogs: the lake's tables, columns and partitions, registered where engines look.

One interface (``Catalog``, ``catalog_interface.py``) and three backends chosen by ``CatalogConfig``
(``config.py``): ``glue`` (AWS Glue, for Athena; ``glue.py``), ``hive`` (a Hive metastore
through Spark SQL: embedded Derby locally, or a remote metastore; ``hive.py``) and ``none``.

What the sync calls (``register.py``, then the catalog step, ``step.py``)::

    catalog = catalog_from_config(cfg, spark)
    current = read_schemas(catalog, database, table_prefix, tables)        # before casting
    step.prepare(catalog, database)                                        # before the commit
    ...                                                                    # write + commit
    outcome = step.register_and_check(catalog, src, cfg.backend, step.Committed(...))
    ...                                                                    # the report
    step.record_report(catalog, table_format, cfg.reports_database, lake_root, source_id,
                       run_id, report.rows(), day)

The step registers with ``register.register_sync`` (tables, partitions, the quarantine), checks
with ``in_step.py`` and keeps the reports table with ``reports.py``; the repair of a
``catalog_only`` request is the same ``register_and_check``, with ``step.FromLake(...)``.

``ddl.py`` prints the same tables as Athena / Hive DDL (``print_table_ddl``).

Import from the modules (``catalog.catalog_interface``, ``catalog.config``, ...): this package re-exports
nothing, so importing one module never loads the others.
"""
