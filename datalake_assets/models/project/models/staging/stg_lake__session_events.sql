{#- The events sessions are made of: pages, screens and tracks, with the page and campaign
    context a browser library sends (page calls also carry them as properties). -#}
{{ config(materialized='ephemeral') }}
{%- set columns = [
    ('message_id', 'string'), ('anonymous_id', 'string'), ('user_id', 'string'),
    ('timestamp', 'timestamp'), ('received_at', 'timestamp'), ('day', 'string'),
    ('context_page_url', 'string', ['properties_url']),
    ('context_page_path', 'string', ['properties_path']),
    ('context_page_referrer', 'string', ['properties_referrer']),
    ('context_campaign_source', 'string'), ('context_campaign_medium', 'string'),
    ('context_campaign_name', 'string'), ('context_campaign_term', 'string'),
    ('context_campaign_content', 'string')] %}
{%- for table, type in [('pages', 'page'), ('screens', 'screen'), ('tracks', 'track')] %}
select message_id, '{{ type }}' as type, anonymous_id, user_id,
       {{ adapter.quote('timestamp') }} as event_at, received_at, day,
       context_page_url as page_url, context_page_path as page_path,
       context_page_referrer as referrer,
       context_campaign_source as utm_source, context_campaign_medium as utm_medium,
       context_campaign_name as utm_campaign, context_campaign_term as utm_term,
       context_campaign_content as utm_content
from ({{ lake_select(table, columns) }}) as {{ table }}
{% if not loop.last %}union all{% endif %}
{%- endfor %}
