"""Catalogs: the lake's tables, columns and partitions, registered where engines look.

One interface (``Catalog``, ``base.py``) and three backends chosen by ``CatalogConfig``
(``config.py``): ``glue`` (AWS Glue, for Athena; ``glue.py``), ``hive`` (a Hive metastore
through Spark SQL: embedded Derby locally, or a remote metastore; ``hive.py``) and ``none``.

What the sync calls (``register.py``, ``reports.py``)::

    catalog = catalog_from_config(cfg, spark)
    current = read_schemas(catalog, database, table_prefix, tables)        # before casting
    ...                                                                    # write + commit
    register_sync(catalog, database=..., table_prefix=..., lake_root=..., source_dir=...,
                  date_layout=..., tables=..., partitions=..., quarantine_hours=...)
    write_report_table(lake_root, source_id, run_id, report, day)
    register_reports(catalog, cfg.reports_database, lake_root, source_id, day)

``ddl.py`` prints the same tables as Athena / Hive DDL (``print_table_ddl``).

Import from the modules (``catalog.base``, ``catalog.config``, ...): this package re-exports
nothing, so importing one module never loads the others.
"""
