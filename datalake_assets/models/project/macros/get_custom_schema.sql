{# Every model lives in the source's own database, beside its event tables
   (SELECT * FROM demo.sessions): the profile's schema, whatever a model's config says. #}
{% macro generate_schema_name(custom_schema_name, node) -%}
  {{ target.schema }}
{%- endmacro %}
