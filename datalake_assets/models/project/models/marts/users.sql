{#- One row per user id: first and last seen (any message with the user id), how many
    messages and anonymous ids, and each trait's latest value: for every traits_* column of
    identifies, the value of the latest identify (by timestamp, then message id) that set it. -#}
{{ config(**datalake_table_config()) }}
{%- set trait_columns = [] %}
{%- for c in lake_columns('identifies') if c.startswith('traits_') %}
  {%- do trait_columns.append(c) %}
{%- endfor %}
with seen as (
  select user_id, min(event_at) as first_seen_at, max(event_at) as last_seen_at,
         count(*) as messages
  from {{ ref('stg_lake__messages') }}
  where user_id is not null
  group by user_id
),
anonymous_ids as (
  select user_id, count(*) as anonymous_ids
  from {{ ref('identity_graph') }}
  group by user_id
),
traits as (
  select user_id
    {%- for c in trait_columns %},
    {{ latest_value(adapter.quote(c), ['coalesce(' ~ adapter.quote('timestamp') ~ ', received_at)',
                                       'message_id']) }} as {{ adapter.quote(c) }}
    {%- endfor %}
  from ({{ lake_select('identifies', [('user_id', 'string'), ('message_id', 'string'),
                                      ('timestamp', 'timestamp'),
                                      ('received_at', 'timestamp')], trait_columns) }}) as i
  where user_id is not null
  group by user_id
)
select
  seen.user_id,
  seen.first_seen_at,
  seen.last_seen_at,
  seen.messages,
  coalesce(anonymous_ids.anonymous_ids, 0) as anonymous_ids
  {%- for c in trait_columns %},
  traits.{{ adapter.quote(c) }}
  {%- endfor %}
from seen
left join anonymous_ids on anonymous_ids.user_id = seen.user_id
left join traits on traits.user_id = seen.user_id
