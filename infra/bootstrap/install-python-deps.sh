#!/usr/bin/env bash
# EMR bootstrap action of the Segment data lake (infra/emr.tf uploads it to
# s3://<bucket>/_bootstrap/ and passes the arguments). It runs on every node, as the `hadoop`
# user with passwordless sudo, before Spark starts, and again on every node that managed
# scaling adds later.
#
# It installs Python <version> from the distribution (Amazon Linux 2023: dnf) and builds a
# virtualenv with the sync job's native dependencies; spark-env points PYSPARK_PYTHON at it.
# The job's own code is not installed here: it comes with each job package.
#
# Usage: install-python-deps.sh --python 3.11 --venv /opt/datalake/python \
#            [--index-url URL] [--import MODULE ...] -- 'pyarrow>=16' 'orjson>=3.9' ...
#
# For a test on a laptop, DATALAKE_BOOTSTRAP_SUDO (default: sudo) and
# DATALAKE_BOOTSTRAP_DNF (default: dnf) replace the two system commands.
set -euo pipefail

python_version=""
venv=""
index_url=""
imports=()

die() { echo "install-python-deps: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --python)    [ $# -ge 2 ] || die "--python needs a value"; python_version="$2"; shift 2 ;;
    --venv)      [ $# -ge 2 ] || die "--venv needs a value"; venv="$2"; shift 2 ;;
    --index-url) [ $# -ge 2 ] || die "--index-url needs a value"; index_url="$2"; shift 2 ;;
    --import)    [ $# -ge 2 ] || die "--import needs a value"; imports+=("$2"); shift 2 ;;
    --)          shift; break ;;
    *)           die "unknown argument: $1" ;;
  esac
done

[[ "$python_version" =~ ^3\.[0-9]{1,2}$ ]] || die "--python must look like 3.11, got '$python_version'"
[[ "$venv" == /* ]] || die "--venv must be an absolute path, got '$venv'"
[ $# -gt 0 ] || die "no packages given after --"
for module in "${imports[@]}"; do
  [[ "$module" =~ ^[A-Za-z_][A-Za-z0-9_.]*$ ]] || die "--import: not a module name: '$module'"
done

sudo_cmd=${DATALAKE_BOOTSTRAP_SUDO:-sudo}
dnf_cmd=${DATALAKE_BOOTSTRAP_DNF:-dnf}
python="python${python_version}"

pip_index=()
if [ -n "$index_url" ]; then
  pip_index=(--index-url "$index_url")
fi

echo "install-python-deps: ${python} into ${venv}: $*"

# The distribution's interpreter (python3.11 and its pip/ensurepip wheels on Amazon Linux 2023).
$sudo_cmd "$dnf_cmd" install -y "${python}" "${python}-pip"

# One virtualenv owned by root and readable by every user: YARN runs the executors as other
# users than hadoop.
$sudo_cmd "$python" -m venv "$venv"
$sudo_cmd "$venv/bin/python" -m pip install --no-cache-dir --retries 10 --timeout 60 \
  "${pip_index[@]}" --upgrade pip
$sudo_cmd "$venv/bin/python" -m pip install --no-cache-dir --retries 10 --timeout 60 \
  "${pip_index[@]}" "$@"

# Fail the node (and so the cluster start) now rather than the first sync later.
$sudo_cmd "$venv/bin/python" -m pip check
for module in "${imports[@]}"; do
  $sudo_cmd "$venv/bin/python" -c "import ${module}" || die "module ${module} does not import in ${venv}"
done

echo "install-python-deps: done"
