"""The lake's table formats (the ``table_format`` setting) and the catalogs an Iceberg lake
may use, named once: for the settings (``settings/formats_section.py``) and for the formats
themselves (``lake/formats/``), which cannot import each other."""

SEGMENT = "segment"  # Segment Data Lakes' hive-style folders (lake/formats/segment.py)
ICEBERG = "iceberg"  # Apache Iceberg tables (lake/formats/iceberg.py)
TABLE_FORMATS = (SEGMENT, ICEBERG)
ICEBERG_CATALOGS = ("sql", "glue")
