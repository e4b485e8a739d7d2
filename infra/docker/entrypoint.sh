#!/bin/sh
# The image's one entry point: which process this container is (compose, Helm and ECS pass the
# role as the command), and its health check. The same script runs outside a container: the
# production topology test starts the code server, the webserver and the daemon through it.
#
#   entrypoint.sh codeserver | webserver | daemon | collector   start that process
#   entrypoint.sh health [ROLE]      exit 0 when it answers (ROLE: the one this container runs)
#   entrypoint.sh <anything else>    run it as given (a `datalake` command, a shell)
#
# Paths and ports come from the environment, with the image's defaults:
#   DAGSTER_HOME (/opt/dagster/home: dagster.yaml, the Postgres instance)
#   DATALAKE_WORKSPACE (/opt/datalake/workspace.yaml: the code server over gRPC)
#   DATALAKE_BIND (0.0.0.0), CODE_SERVER_PORT (4000), WEBSERVER_PORT (3000),
#   COLLECTOR_PORT (8088), DATALAKE_ROLE_FILE (/tmp/datalake-role),
#   DATALAKE_SETTINGS_TOML (the settings themselves, written to DATALAKE_SETTINGS)
set -eu
workspace="${DATALAKE_WORKSPACE:-/opt/datalake/workspace.yaml}"
bind="${DATALAKE_BIND:-0.0.0.0}"
code_port="${CODE_SERVER_PORT:-4000}"
web_port="${WEBSERVER_PORT:-3000}"
collector_port="${COLLECTOR_PORT:-8088}"
role_file="${DATALAKE_ROLE_FILE:-/tmp/datalake-role}"
# the health checks ask the process on its own machine
local_host() { case "$bind" in 0.0.0.0|::|"") echo 127.0.0.1 ;; *) echo "$bind" ;; esac; }

http_ok() {
  python -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    sys.exit(0 if r.status == 200 else 1)' "$1"
}

# ECS has no file mounts: there the settings come as DATALAKE_SETTINGS_TOML (no secret in it),
# written where DATALAKE_SETTINGS points before any process starts (runs included).
if [ -n "${DATALAKE_SETTINGS_TOML:-}" ]; then
  : "${DATALAKE_SETTINGS:=/tmp/datalake/lake.toml}"
  mkdir -p "$(dirname "$DATALAKE_SETTINGS")"
  printf '%s\n' "$DATALAKE_SETTINGS_TOML" > "$DATALAKE_SETTINGS"
  export DATALAKE_SETTINGS
fi

role="${1:-}"
case "$role" in
  codeserver|webserver|daemon|collector) shift; echo "$role" > "$role_file" ;;
esac
case "$role" in
  codeserver)
    exec dagster code-server start -m datalake_assets.definitions -h "$bind" -p "$code_port" "$@" ;;
  webserver)
    exec dagster-webserver -w "$workspace" -h "$bind" -p "$web_port" "$@" ;;
  daemon)
    exec dagster-daemon run -w "$workspace" "$@" ;;
  collector)
    exec datalake collect --host "$bind" --port "$collector_port" "$@" ;;
  health)
    what="${2:-$(cat "$role_file" 2>/dev/null || true)}"
    case "$what" in
      codeserver) exec dagster api grpc-health-check -h "$(local_host)" -p "$code_port" ;;
      webserver) http_ok "http://$(local_host):$web_port/server_info" ;;
      # the daemon's heartbeats in the instance (Postgres) are recent
      daemon) exec dagster-daemon liveness-check ;;
      collector) http_ok "http://$(local_host):$collector_port/health" ;;
      *) echo "health: no role (pass one, or start a role first)" >&2; exit 2 ;;
    esac ;;
  "") echo "usage: entrypoint.sh codeserver|webserver|daemon|collector|health [ROLE]" >&2; exit 2 ;;
  *) exec "$@" ;;
esac
