{#- Every message of the six standard tables, in one shape: who, what, when, which day.
    tracks holds every track call (each event's own table holds the same rows again), so the
    event tables are not read here. event_at is the message's timestamp (received_at when it
    has none). -#}
{{ config(materialized='ephemeral') }}
{%- set types = [('tracks', 'track'), ('pages', 'page'), ('screens', 'screen'),
                 ('identifies', 'identify'), ('groups', 'group'), ('aliases', 'alias')] %}
{%- set columns = [('message_id', 'string'), ('anonymous_id', 'string'), ('user_id', 'string'),
                   ('event', 'string'), ('timestamp', 'timestamp'),
                   ('received_at', 'timestamp'), ('day', 'string')] %}
{%- for table, type in types %}
select message_id, '{{ type }}' as type,
       {{ 'coalesce(event, \'\')' if type == 'track' else "'" ~ type ~ "'" }} as event_name,
       anonymous_id, user_id, coalesce({{ adapter.quote('timestamp') }}, received_at) as event_at,
       received_at, day
from ({{ lake_select(table, columns) }}) as {{ table }}
{% if not loop.last %}union all{% endif %}
{%- endfor %}
