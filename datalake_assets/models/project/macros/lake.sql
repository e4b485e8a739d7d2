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
