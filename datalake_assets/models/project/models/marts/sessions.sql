{#- Sessions of pages, screens and tracks (rules: docs/concepts/models.md, "sessions").

  * A visitor is their anonymous_id (else their user_id). Their events are ordered by when
    they happened; a gap of more than session_gap_minutes starts a new session (a gap of
    exactly that long continues it, as dbt-segment does).
  * When it happened: the event's timestamp if it was received within late_event_hours of
    it (a late event joins the session it belongs to), else when it was received (a clock
    far off, or an event held back longer than that, starts or joins a session then).
  * A session belongs to the day it started (session_day). Building received days
    [min_day, max_day] rewrites session days [min_day - 1, max_day]: the day before gets the
    events of min_day that continue or belong to its sessions (a session across midnight, a
    late event). Events from two days before min_day are read as context only, so that a
    session that began then is not cut.
-#}
{#- Spark: incremental insert_overwrite of the session days' partitions; other engines: a table
    of exactly session days [min_day - 1, max_day] (macros/portable.sql, datalake_daily_config). -#}
{{ config(tags=['daily'], **datalake_daily_config('session_day', 1)) }}
{%- set gap_s = var('session_gap_minutes', 30) * 60 %}
{%- set late_us = var('late_event_hours', 3) * 3600 * 1000000 %}
with events as (
  select * from {{ ref('stg_lake__session_events') }}
  where day between {{ min_day(2) }} and {{ max_day() }}
    and coalesce(anonymous_id, user_id) is not null
),
placed as (
  select *,
    coalesce(anonymous_id, {{ dbt.concat(["'user:'", 'user_id']) }}) as visitor,
    case when event_at is not null
              and abs({{ epoch_micros('received_at') }} - {{ epoch_micros('event_at') }})
                  <= {{ late_us }}
         then event_at else received_at end as placed_at
  from events
),
gaps as (
  select *,
    {{ seconds_between('lag(placed_at) over (partition by visitor order by placed_at, message_id)',
                       'placed_at') }} as gap_s
  from placed
),
numbered as (
  select *,
    sum(case when gap_s is null or gap_s > {{ gap_s }} then 1 else 0 end)
      over (partition by visitor order by placed_at, message_id
            rows between unbounded preceding and current row) as session_number
  from gaps
),
{#- the window spelled out at each use: a named WINDOW clause is not every engine's -#}
{%- set session_window -%}
  (partition by visitor, session_number order by placed_at, message_id
   rows between unbounded preceding and unbounded following)
{%- endset %}
firsts as (
  select *,
    {%- for c in ['page_url', 'page_path', 'referrer', 'utm_source', 'utm_medium',
                  'utm_campaign', 'utm_term', 'utm_content'] %}
    {{ first_value_ignore_nulls(c) }} over {{ session_window }}
      as first_{{ c }}{{ "," if not loop.last }}
    {%- endfor %}
  from numbered
),
sessions as (
  select
    visitor,
    min(placed_at) as started_at,
    max(placed_at) as ended_at,
    count(*) as event_count,
    sum(case when type = 'page' then 1 else 0 end) as page_views,
    max(anonymous_id) as anonymous_id,
    max(user_id) as user_id,
    {%- for c in ['page_url', 'page_path', 'referrer', 'utm_source', 'utm_medium',
                  'utm_campaign', 'utm_term', 'utm_content'] %}
    max(first_{{ c }}) as first_{{ c }},
    {%- endfor %}
    max(day) as last_received_day
  from firsts
  group by visitor, session_number
)
select
  {#- md5 hex of "<visitor>|<start in epoch microseconds>", the same on every engine -#}
  {%- set started_us = 'cast(' ~ epoch_micros('started_at') ~ ' as ' ~ dbt.type_string() ~ ')' %}
  {{ dbt.hash(dbt.concat(['visitor', "'|'", started_us])) }} as session_id,
  visitor,
  anonymous_id,
  user_id,
  started_at,
  ended_at,
  {{ seconds_between('started_at', 'ended_at') }} as duration_seconds,
  event_count,
  page_views,
  first_page_url, first_page_path, first_referrer,
  first_utm_source, first_utm_medium, first_utm_campaign, first_utm_term, first_utm_content,
  {{ day_string('started_at') }} as session_day
from sessions
where {{ day_string('started_at') }} between {{ min_day(1) }} and {{ max_day() }}
