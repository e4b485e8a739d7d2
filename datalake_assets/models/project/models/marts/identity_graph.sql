{#- Every anonymous id <-> user id link: from any message carrying both (identify, track,
    page, screen, group, alias) and from an alias call's previousId -> userId. First and last
    seen by the messages' timestamps; seen_in lists the calls that carried the link. -#}
{{ config(**datalake_table_config()) }}
with links as (
  select anonymous_id, user_id, event_at, type as seen_in
  from {{ ref('stg_lake__messages') }}
  where anonymous_id is not null and user_id is not null
  union all
  select previous_id as anonymous_id, user_id,
         coalesce({{ adapter.quote('timestamp') }}, received_at) as event_at,
         'alias_previous_id' as seen_in
  from ({{ lake_select('aliases', [('previous_id', 'string'), ('user_id', 'string'),
                                   ('timestamp', 'timestamp'),
                                   ('received_at', 'timestamp')]) }}) as aliases
  where previous_id is not null and user_id is not null and previous_id <> user_id
)
select
  {{ dbt.hash(dbt.concat(['anonymous_id', "'|'", 'user_id'])) }} as link_id,
  anonymous_id,
  user_id,
  min(event_at) as first_seen_at,
  max(event_at) as last_seen_at,
  count(*) as messages,
  {{ sorted_distinct_list('seen_in', ',') }} as seen_in
from links
group by anonymous_id, user_id
