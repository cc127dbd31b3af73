#!/usr/bin/env bash
# Installs PyFlink (apache-flink, FLINK_VERSION, default 2.3.0) into a venv under ~/.cache for
# `saql submit --flink local` and tests/flink.rs, when it is not there yet. Prints the venv's
# python. Flink also needs Java 17 or newer on PATH (checked, not installed).
set -euo pipefail
venv="${SAQL_FLINK_VENV:-$HOME/.cache/saql-flink-venv}"
version="${FLINK_VERSION:-2.3.0}"
if ! "$venv/bin/python" -c "import pyflink" 2>/dev/null; then
    if ! python3 -m venv --help >/dev/null 2>&1; then
        apt-get install -y python3-venv >/dev/null
    fi
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "apache-flink==$version"
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [[ -z "$java_major" || "$java_major" -lt 17 ]]; then
    echo "tests/flink/setup.sh: Flink $version needs Java 17 or newer on PATH (found: ${java_major:-none})" >&2
fi
echo "$venv/bin/python"
