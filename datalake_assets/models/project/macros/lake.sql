{#
  Reading the lake's tables (sources generated from the catalog: models/workspace.py).

  A source table may not exist yet (no event of its type synced) and its columns depend on the
  traffic (a campaign column appears with the first message that has one). lake_select
  therefore asks the catalog at run time and selects every wanted column, as NULL of its type
  where the table lacks it, or no rows at all where the table is missing. source() is called
  either way, so dbt (and Dagster) see the lineage.
#}

{% macro lake_columns(table_name) %}
  {%- set rel = source('lake', table_name) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set found = adapter.get_relation(database=rel.database, schema=rel.schema,
                                       identifier=rel.identifier) -%}
  {%- if found is none -%}{{ return([]) }}{%- endif -%}
  {{ return(adapter.get_columns_in_relation(found) | map(attribute='column')
            | map('lower') | list) }}
{% endmacro %}

{# columns: a list of (name, spark type) or (name, spark type, [other column names to
   coalesce from, in order]) #}
{% macro lake_select(table_name, columns, extra_columns=[]) %}
  {%- set rel = source('lake', table_name) -%}
  {%- set existing = lake_columns(table_name) -%}
  select
  {%- for col in columns %}
    {%- set names = [col[0]] + (col[2] if col | length > 2 else []) -%}
    {%- set present = [] -%}
    {%- for n in names if n in existing -%}{%- do present.append('`' ~ n ~ '`') -%}{%- endfor %}
    {% if present | length == 1 -%}
      cast({{ present[0] }} as {{ col[1] }})
    {%- elif present -%}
      cast(coalesce({{ present | join(', ') }}) as {{ col[1] }})
    {%- else -%}
      cast(null as {{ col[1] }})
    {%- endif %} as `{{ col[0] }}`{{ "," if not loop.last or extra_columns }}
  {%- endfor %}
  {%- for c in extra_columns %}
    `{{ c }}`{{ "," if not loop.last }}
  {%- endfor %}
  {%- if existing %}
  from {{ rel }}
  {%- else %}
  where false
  {%- endif %}
{% endmacro %}

{# The received days a build covers: --vars {min_day, max_day} from Dagster's partitions;
   without them, every day. #}
{% macro min_day(days_before=0) -%}
  {%- set d = var('min_day', '0001-01-01') -%}
  {%- if days_before -%}
  date_format(date_sub(to_date('{{ d }}'), {{ days_before }}), 'yyyy-MM-dd')
  {%- else -%}
  '{{ d }}'
  {%- endif -%}
{%- endmacro %}

{% macro max_day() -%}
  '{{ var('max_day', '9999-12-31') }}'
{%- endmacro %}

{# seconds between two timestamps, as a double (microsecond precision) #}
{% macro seconds_between(a, b) -%}
  ((unix_micros({{ b }}) - unix_micros({{ a }})) / 1000000.0)
{%- endmacro %}

{# A pre-hook of the daily models (insert_overwrite): empties the partitions of the days
   being rebuilt, [min_day - days_before, max_day], before the insert. Spark's dynamic
   overwrite replaces only the partitions the new rows fall in, so without it a day that has
   no rows any more (its only sessions were a forgotten person's) would keep its old ones.
   Emptied with a static overwrite, not dropped: the models' tables have a location of their
   own (external tables), whose files DROP PARTITION leaves behind. A build without --vars
   replaces the whole table and needs none of this. #}
{% macro clear_days(column, days_before=0) %}
  {%- if execute and is_incremental() and var('min_day', none) is not none -%}
    {%- set first = (modules.datetime.date.fromisoformat(var('min_day'))
                     - modules.datetime.timedelta(days=days_before)).isoformat() -%}
    {%- set last = var('max_day') -%}
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
