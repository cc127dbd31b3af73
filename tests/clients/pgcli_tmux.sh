#!/usr/bin/env bash
# pgcli, driven in tmux against a running saql server: it connects without a traceback,
# completes a stream's name and a column's, and its \dt, \dm and \d NAME list and describe.
# Each step waits (up to 15 s) for what it expects on the screen. Prints PASS/FAIL per check;
# exits non-zero on any failure.
#
#   tests/clients/pgcli_tmux.sh PGCLI PORT
set -uo pipefail

pgcli="$1"
port="$2"
sock="saql-pgcli-$$"
home="$(mktemp -d)"
failed=0
t() { tmux -L "$sock" "$@"; }
screen() { t capture-pane -p -t pgcli -S -200; }
cleanup() {
    t kill-server 2>/dev/null || true
    rm -rf "$home"
}
trap cleanup EXIT

# Waits until the screen shows the extended regular expression $1.
await() {
    for _ in $(seq 1 150); do
        if screen | grep -Eq -- "$1"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

check() {
    local name="$1" pattern="$2"
    if await "$pattern"; then
        echo "PASS pgcli: $name"
    else
        echo "FAIL pgcli: $name (no /$pattern/ on the screen)"
        screen | tail -25
        failed=1
    fi
}

psql -X -q -h 127.0.0.1 -p "$port" -U saql -d saql -c \
    "CREATE STREAM pgcli_events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)" \
    -c "CREATE CONTINUOUS QUERY pgcli_big AS SELECT ts, host, amount FROM pgcli_events WHERE amount > 10" \
    || { echo "FAIL pgcli: setup"; exit 1; }

# A fresh HOME: pgcli's own config and history, no pager.
t new-session -d -s pgcli -x 160 -y 45 \
    "HOME=$home PAGER=cat TERM=xterm $pgcli -h 127.0.0.1 -p $port -U saql -d saql"
check "connects and shows its prompt" 'saql@127\.0\.0\.1:saql>'
# The completion refresher runs in the background after connecting.
sleep 2
t send-keys -t pgcli 'SELECT * FROM pgcli_ev'
check "completes a stream's name" 'pgcli_events +table'
t send-keys -t pgcli C-u
t send-keys -t pgcli 'SELECT * FROM pgcli_events WHERE amo'
check "completes a column's name" 'amount +column'
t send-keys -t pgcli C-u
t send-keys -t pgcli '\dt' Enter
check "\\dt lists the stream" '\| public +\| pgcli_events +\| table'
t send-keys -t pgcli '\dm' Enter
check "\\dm lists the query" '\| public +\| pgcli_big +\| materialized view'
t send-keys -t pgcli '\d pgcli_events' Enter
check "\\d NAME describes its columns" '\| ts +\| timestamp without time zone'
if screen | grep -Eq 'Traceback|does not exist|not supported'; then
    echo "FAIL pgcli: an error on the screen"
    screen | tail -40
    failed=1
fi
exit $failed
