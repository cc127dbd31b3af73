#!/usr/bin/env bash
# Runs COMMAND... against a standalone Flink cluster started from the PyFlink package's own
# bin/ and lib/ (one JobManager, one TaskManager with 2 slots), every address 127.0.0.1, REST
# on port PORT; stops the cluster afterwards and exits with COMMAND's status.
#
#   tests/flink/cluster.sh PYTHON PORT COMMAND...
#   tests/flink/cluster.sh --check     # exit 0 when a namespace of our own is possible
#
# PYTHON is the venv's python (it has PyFlink). All of it (cluster and COMMAND) runs in a
# network namespace of its own with only `lo` (unshare --net, as root), so nothing the cluster
# opens is reachable from outside, whatever interface it picks; without one it refuses to run.
set -euo pipefail
in_namespace() {
    unshare --net -- sh -c 'ip link set lo up && exec "$0" "$@"' "$@"
}
if [ "${1:-}" = "--check" ]; then
    in_namespace true 2>/dev/null
    exit
fi
if [ -z "${SAQL_FLINK_CLUSTER_NS:-}" ]; then
    export SAQL_FLINK_CLUSTER_NS=1
    in_namespace bash "$0" "$@"
    exit
fi
python="$1"
port="$2"
shift 2
home=$("$python" -c 'import os, pyflink; print(os.path.dirname(os.path.abspath(pyflink.__file__)))')
conf=$(mktemp -d)
cp -r "$home/conf/." "$conf/"
java_opts=$(sed -n 's/^ *all: \(--add-.*\)$/\1/p' "$home/conf/config.yaml" | head -1)
cat > "$conf/config.yaml" <<YAML
env.java.opts.all: $java_opts
jobmanager.bind-host: 127.0.0.1
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: 6123
jobmanager.memory.process.size: 1024m
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: 2
taskmanager.memory.process.size: 1536m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $port
blob.server.port: 6124
parallelism.default: 1
python.executable: $python
YAML
export FLINK_CONF_DIR="$conf" FLINK_LOG_DIR="$conf/log" _python_worker_execution_mode=process
mkdir -p "$FLINK_LOG_DIR"
"$home/bin/jobmanager.sh" start-foreground >"$conf/jobmanager.out" 2>&1 &
jm=$!
"$home/bin/taskmanager.sh" start-foreground >"$conf/taskmanager.out" 2>&1 &
tm=$!
stop() {
    kill "$jm" "$tm" 2>/dev/null || true
    wait "$jm" "$tm" 2>/dev/null || true
    rm -rf "$conf"
}
trap stop EXIT
# Ready when the REST endpoint lists a TaskManager with free slots.
"$python" - "$port" <<'PY'
import json, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/overview"
for _ in range(240):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if json.load(r).get("slots-available", 0) >= 2:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit("the standalone Flink cluster did not come up in 120 s")
PY
status=0
"$@" || status=$?
if [ "$status" -ne 0 ]; then
    tail -n 40 "$conf/log/"*taskmanager*.log "$conf/log/"*standalonesession*.log >&2 2>/dev/null || true
fi
exit "$status"
