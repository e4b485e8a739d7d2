{#- Messages per received day, type and event name (the event of a track; the type itself
    for the other calls), with the distinct users and anonymous ids that sent them. One
    partition per day: a build of days [min_day, max_day] replaces exactly those days. -#}
{#- Spark: incremental insert_overwrite of the days' partitions; other engines: a table of
    exactly the days built (macros/portable.sql, datalake_daily_config). -#}
{{ config(tags=['daily'], **datalake_daily_config('day')) }}
select
  concat_ws('|', day, type, event_name) as daily_event_count_id,
  type,
  event_name,
  count(*) as events,
  count(distinct user_id) as distinct_users,
  count(distinct anonymous_id) as distinct_anonymous_ids,
  day
from {{ ref('stg_lake__messages') }}
where day between {{ min_day() }} and {{ max_day() }}
group by day, type, event_name
