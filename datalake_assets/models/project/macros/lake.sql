{#
  Reading the lake's tables (sources generated from the catalog: models/workspace.py).

  A source table may not exist yet (no event of its type synced) and its columns depend on the
  traffic (a campaign column appears with the first message that has one). lake_select
  therefore asks the catalog at run time and selects every wanted column, as NULL of its type
  where the table lacks it, or no rows at all where the table is missing. source() is called
  either way, so dbt (and Dagster) see the lineage.
#}

{#- The table's columns, {lower-case name: lower-case type}, in the table's order; {} when it
    does not exist (or at parse time). With --vars '{"datalake_introspect": false}' nothing is
    asked: the table is taken to have exactly the `assumed` columns, of unknown type (a compile
    without a connection: Athena in the tests). -#}
{% macro lake_column_types(table_name, assumed=[]) %}
  {%- set rel = source('lake', table_name) -%}
  {%- set types = {} -%}
  {%- if not execute -%}{{ return(types) }}{%- endif -%}
  {%- if not var('datalake_introspect', true) -%}
    {%- for c in assumed -%}{%- do types.update({c | lower: none}) -%}{%- endfor -%}
    {{ return(types) }}
  {%- endif -%}
  {%- set found = adapter.get_relation(database=rel.database, schema=rel.schema,
                                       identifier=rel.identifier) -%}
  {%- if found is none -%}{{ return(types) }}{%- endif -%}
  {%- for c in adapter.get_columns_in_relation(found) -%}
    {%- do types.update({c.column | lower: c.dtype | lower}) -%}
  {%- endfor -%}
  {{ return(types) }}
{% endmacro %}

{#- The table's column names (lower case), [] when it does not exist. -#}
{% macro lake_columns(table_name, assumed=[]) %}
  {{ return(lake_column_types(table_name, assumed) | list) }}
{% endmacro %}

{# columns: a list of (name, type) or (name, type, [other column names to coalesce from, in
   order]), the type named the Spark way ('string', 'timestamp': macro lake_type); every
   identifier quoted the target's way (adapter.quote). #}
{% macro lake_select(table_name, columns, extra_columns=[]) %}
  {%- set rel = source('lake', table_name) -%}
  {%- set wanted = [] -%}
  {%- for col in columns -%}
    {%- do wanted.append(col[0]) -%}
    {%- do wanted.extend(col[2] if col | length > 2 else []) -%}
  {%- endfor -%}
  {%- set existing = lake_column_types(table_name, wanted + extra_columns) -%}
  select
  {%- for col in columns %}
    {%- set names = [col[0]] + (col[2] if col | length > 2 else []) -%}
    {%- set present = [] -%}
    {%- for n in names if n in existing -%}{%- do present.append(n) -%}{%- endfor %}
    {% if present | length == 1 -%}
      {{ lake_cast(adapter.quote(present[0]), col[1], existing[present[0]]) }}
    {%- elif present -%}
      {%- set parts = [] -%}
      {%- for n in present -%}{%- do parts.append(adapter.quote(n)) -%}{%- endfor -%}
      {{ lake_cast('coalesce(' ~ parts | join(', ') ~ ')', col[1], existing[present[0]]) }}
    {%- else -%}
      cast(null as {{ lake_type(col[1]) }})
    {%- endif %} as {{ adapter.quote(col[0]) }}{{ "," if not loop.last or extra_columns }}
  {%- endfor %}
  {%- for c in extra_columns %}
    {{ adapter.quote(c) }}{{ "," if not loop.last }}
  {%- endfor %}
  {%- if existing %}
  from {{ rel }}
  {%- else %}
  where false
  {%- endif %}
{% endmacro %}

{# The received days a build covers, [min_day, max_day], or none: every day. Dagster's daily
   partitions pass them in dbt's environment (DATALAKE_MIN_DAY, DATALAKE_MAX_DAY), read only
   when the build runs (`execute`): dbt re-parses the whole project when --vars change, and a
   file that read an env_var while being parsed whenever that variable changes, so a new range
   of days re-parses nothing. --vars '{"min_day": ..., "max_day": ...}' by hand work too. #}
{% macro build_days() -%}
  {%- set first = var('min_day', none) -%}
  {%- set last = var('max_day', none) -%}
  {%- if first is none and execute -%}
    {%- set first = env_var('DATALAKE_MIN_DAY', '') or none -%}
    {%- set last = env_var('DATALAKE_MAX_DAY', '') or none -%}
  {%- endif -%}
  {{ return(none if first is none else [first | string, (last or first) | string]) }}
{%- endmacro %}

{% macro min_day(days_before=0) -%}
  {%- set days = build_days() -%}
  {%- if days is none -%}
  '0001-01-01'
  {%- else -%}
  {#- the day before, computed here: a literal every engine compares the same -#}
  '{{ (modules.datetime.date.fromisoformat(days[0])
       - modules.datetime.timedelta(days=days_before)).isoformat() }}'
  {%- endif -%}
{%- endmacro %}

{% macro max_day() -%}
  {%- set days = build_days() -%}
  '{{ '9999-12-31' if days is none else days[1] }}'
{%- endmacro %}

{# seconds between two timestamps, as a double (microsecond precision) #}
{% macro seconds_between(a, b) -%}
  cast(({{ epoch_micros(b) }} - {{ epoch_micros(a) }}) / 1000000.0 as double)
{%- endmacro %}

{# Spark only (macros/portable.sql, datalake_daily_config, adds it there; elsewhere a daily
   model is a table of exactly the days built, and this does nothing on another target).
   A pre-hook of the daily models (insert_overwrite): empties the partitions of the days
   being rebuilt, [min_day - days_before, max_day], before the insert. Spark's dynamic
   overwrite replaces only the partitions the new rows fall in, so without it a day that has
   no rows any more (its only sessions were a forgotten person's) would keep its old ones.
   Emptied with a static overwrite, not dropped: the models' tables have a location of their
   own (external tables), whose files DROP PARTITION leaves behind. A build without days
   replaces the whole table and needs none of this. #}
{% macro clear_days(column, days_before=0) %}
  {%- set days = build_days() -%}
  {%- if target.type == 'spark' and execute and is_incremental() and days is not none -%}
    {%- set first = (modules.datetime.date.fromisoformat(days[0])
                     - modules.datetime.timedelta(days=days_before)).isoformat() -%}
    {%- set last = days[1] -%}
    {#- no rows, typed as the table (Spark refuses to overwrite a table read by the same
        statement, so not "select ... from this where false") -#}
    {%- set nothing = [] -%}
    {%- for c in adapter.get_columns_in_relation(this) if c.column != column -%}
      {%- do nothing.append('cast(null as ' ~ c.dtype ~ ') as `' ~ c.column ~ '`') -%}
    {%- endfor -%}
    {%- for row in run_query('show partitions ' ~ this).rows -%}
      {%- set day = row[0].split('=', 1)[1] -%}
      {%- if first <= day <= last -%}
        {%- do run_query('insert overwrite table ' ~ this ~ ' partition (' ~ column ~ " = '"
                         ~ day ~ "') select " ~ nothing | join(', ') ~ ' where false') -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{% endmacro %}
