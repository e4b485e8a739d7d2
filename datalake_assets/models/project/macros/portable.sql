{#
  Portable SQL: the few places where Spark SQL, DuckDB and Trino (Athena) differ, each one a
  macro dispatched on the target's adapter (adapter.dispatch without a namespace searches this
  project first: spark__x, duckdb__x, athena__x, else default__x). Everything else in the models
  is SQL the three engines share, or one of dbt's own cross-database macros (dbt.hash,
  dbt.concat, dbt.type_string, ...). A model written with these runs on every engine:
  docs/concepts/models.md, "Portable SQL".
#}

{# ---- model configuration ------------------------------------------------------------------ #}

{#- The config of a daily model (tagged daily), whose rows belong to the day in `column`, a
    build of received days [min_day, max_day] holding days [min_day - days_before, max_day]:

    * Spark: an incremental insert_overwrite of those days' partitions (Parquet, partitioned by
      `column`), emptied first by the clear_days pre-hook (a day left without rows must lose
      its old ones).
    * other engines (DuckDB, Athena): a plain table holding exactly the days built; the
      Python side writes its rows into the lake in place of those days, which it reads from
      meta.datalake (the day column and how many days before min_day a build rewrites).

    Use: {{ config(tags=['daily'], **datalake_daily_config('day')) }} -#}
{% macro datalake_daily_config(column, days_before=0) -%}
  {%- set meta = {'datalake': {'day_column': column, 'days_before': days_before}} -%}
  {%- if target.type == 'spark' -%}
    {{ return({'materialized': 'incremental', 'incremental_strategy': 'insert_overwrite',
               'partition_by': [column], 'file_format': 'parquet', 'meta': meta,
               'pre_hook': "{{ clear_days('" ~ column ~ "', " ~ days_before ~ ") }}"}) }}
  {%- else -%}
    {{ return({'materialized': 'table', 'meta': meta}) }}
  {%- endif -%}
{%- endmacro %}

{#- The config of a whole-table model (rebuilt entirely from the lake's history). -#}
{% macro datalake_table_config() -%}
  {%- if target.type == 'spark' -%}
    {{ return({'materialized': 'table', 'file_format': 'parquet'}) }}
  {%- else -%}
    {{ return({'materialized': 'table'}) }}
  {%- endif -%}
{%- endmacro %}

{# ---- types ---------------------------------------------------------------------------------- #}

{#- A column type named the Spark way ('string', 'timestamp', 'bigint', 'double', ...) in the
    target's SQL: dbt.type_string() and dbt.type_timestamp() (Spark: string, DuckDB: TEXT,
    Athena: VARCHAR); any other name as it is. -#}
{% macro lake_type(name) -%}
  {%- if name | lower == 'string' -%}{{ dbt.type_string() }}
  {%- elif name | lower == 'timestamp' -%}{{ dbt.type_timestamp() }}
  {%- else -%}{{ name }}
  {%- endif -%}
{%- endmacro %}

{#- A lake column (`source_type`: its type in the table, lower case; none when unknown) cast to
    the type named `name` the Spark way. -#}
{% macro lake_cast(expr, name, source_type=none) -%}
  {{ return(adapter.dispatch('lake_cast')(expr, name, source_type)) }}
{%- endmacro %}

{% macro default__lake_cast(expr, name, source_type) -%}
  cast({{ expr }} as {{ lake_type(name) }})
{%- endmacro %}

{#- DuckDB reads the lake's timestamps (instants, UTC-adjusted in Parquet) as timestamptz, whose
    cast to timestamp takes the wall time of the session's TimeZone (a laptop's own): their UTC
    wall time instead, as Spark's UTC session gives. -#}
{% macro duckdb__lake_cast(expr, name, source_type) -%}
  {%- if name | lower == 'timestamp' and source_type
        and (source_type == 'timestamptz' or 'with time zone' in source_type) -%}
  cast(timezone('UTC', {{ expr }}) as {{ lake_type(name) }})
  {%- else -%}
  cast({{ expr }} as {{ lake_type(name) }})
  {%- endif -%}
{%- endmacro %}

{# ---- timestamps ----------------------------------------------------------------------------- #}

{#- Microseconds since 1970-01-01 00:00:00 UTC of a timestamp, as a bigint. -#}
{% macro epoch_micros(ts) -%}
  {{ return(adapter.dispatch('epoch_micros')(ts)) }}
{%- endmacro %}

{% macro default__epoch_micros(ts) -%}
  cast(round(extract(epoch from {{ ts }}) * 1000000) as bigint)
{%- endmacro %}

{% macro spark__epoch_micros(ts) -%}
  unix_micros({{ ts }})
{%- endmacro %}

{% macro duckdb__epoch_micros(ts) -%}
  epoch_us({{ ts }})
{%- endmacro %}

{#- Trino: to_unixtime is a double of seconds; rounded, exact to the microsecond for any date
    of this millennium (Athena's timestamps are milliseconds anyway). -#}
{% macro athena__epoch_micros(ts) -%}
  cast(round(to_unixtime({{ ts }}) * 1000000) as bigint)
{%- endmacro %}

{#- The UTC day of a timestamp as a 'yyyy-MM-dd' string (the lake's day partitions). -#}
{% macro day_string(ts) -%}
  {{ return(adapter.dispatch('day_string')(ts)) }}
{%- endmacro %}

{% macro default__day_string(ts) -%}
  cast(cast({{ ts }} as date) as {{ dbt.type_string() }})
{%- endmacro %}

{% macro spark__day_string(ts) -%}
  date_format({{ ts }}, 'yyyy-MM-dd')
{%- endmacro %}

{% macro duckdb__day_string(ts) -%}
  strftime({{ ts }}, '%Y-%m-%d')
{%- endmacro %}

{% macro athena__day_string(ts) -%}
  date_format({{ ts }}, '%Y-%m-%d')
{%- endmacro %}

{# ---- aggregates and windows ----------------------------------------------------------------- #}

{#- first_value of a window, skipping nulls: the part before OVER
    ({{ first_value_ignore_nulls('page_url') }} over w). -#}
{% macro first_value_ignore_nulls(expr) -%}
  {{ return(adapter.dispatch('first_value_ignore_nulls')(expr)) }}
{%- endmacro %}

{#- the SQL standard's, Trino's (Athena) -#}
{% macro default__first_value_ignore_nulls(expr) -%}
  first_value({{ expr }}) ignore nulls
{%- endmacro %}

{% macro spark__first_value_ignore_nulls(expr) -%}
  first_value({{ expr }}, true)
{%- endmacro %}

{% macro duckdb__first_value_ignore_nulls(expr) -%}
  first_value({{ expr }} ignore nulls)
{%- endmacro %}

{#- The distinct non-null values of a group, sorted, joined with `separator` (an aggregate):
    'alias_previous_id,identify,track'. -#}
{% macro sorted_distinct_list(expr, separator=',') -%}
  {{ return(adapter.dispatch('sorted_distinct_list')(expr, separator)) }}
{%- endmacro %}

{% macro default__sorted_distinct_list(expr, separator) -%}
  listagg(distinct {{ expr }}, '{{ separator }}') within group (order by {{ expr }})
{%- endmacro %}

{% macro spark__sorted_distinct_list(expr, separator) -%}
  concat_ws('{{ separator }}', array_sort(collect_set({{ expr }})))
{%- endmacro %}

{% macro duckdb__sorted_distinct_list(expr, separator) -%}
  string_agg(distinct {{ expr }}, '{{ separator }}' order by {{ expr }})
{%- endmacro %}

{#- Trino: array_join skips the nulls array_agg keeps -#}
{% macro athena__sorted_distinct_list(expr, separator) -%}
  array_join(array_sort(array_distinct(array_agg({{ expr }}))), '{{ separator }}')
{%- endmacro %}

{#- The value of the group's latest row where it is not null, "latest" by the expressions of
    `order_by` in order (the last breaks ties: a message id), an aggregate; null when every
    value is. latest_value('traits_plan', ['coalesce("timestamp", received_at)', 'message_id']) -#}
{% macro latest_value(expr, order_by) -%}
  {{ return(adapter.dispatch('latest_value')(expr, order_by)) }}
{%- endmacro %}

{#- Trino (Athena) and DuckDB: max_by over a row, which compares field by field -#}
{% macro default__latest_value(expr, order_by) -%}
  max_by({{ expr }}, row({{ order_by | join(', ') }})) filter (where {{ expr }} is not null)
{%- endmacro %}

{#- Spark: the last of the sorted structs (collect_list drops the nulls' rows) -#}
{% macro spark__latest_value(expr, order_by) -%}
  element_at(array_sort(collect_list(case when {{ expr }} is not null then
    struct({% for o in order_by %}{{ o }} as o{{ loop.index }}, {% endfor %}{{ expr }} as v) end)),
    -1).v
{%- endmacro %}
