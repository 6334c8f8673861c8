#!/usr/bin/env bash
# Two throwaway PostgreSQL clusters for profiling bench/history_scale.py (run as root):
# the shared server's settings (autovacuum off, the rest default) plus pg_stat_statements
# preloaded, which `history_scale.py --statements` reads.
#
#   port 5441: data under /var/tmp, on the root file system as it is mounted here;
#   port 5442: data on an ext4 in a loop-mounted file, mounted without `discard`
#              (this machine's root ext4 is mounted with it: freeing blocks costs more).
#
#   bench/scratch_postgres.sh start    # then: --db postgresql://postgres@127.0.0.1:5441/test
#   bench/scratch_postgres.sh stop     # stops both and removes their data and the loop file
set -euo pipefail

BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
IMAGE=/var/tmp/fencepost-scratch-nodiscard.img
MOUNT=/mnt/fencepost-scratch-nodiscard
ON_ROOT=/var/tmp/fencepost-scratch-root
CLUSTERS=("$ON_ROOT/data:5441" "$MOUNT/data:5442")
OPTIONS="-k /tmp -c listen_addresses=127.0.0.1 -c autovacuum=off \
-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all \
-c pg_stat_statements.track_planning=on"

as_postgres() { su postgres -c "$*"; }

case "${1:-}" in
start)
    if ! mountpoint -q "$MOUNT"; then
        truncate -s 40G "$IMAGE"
        mkfs.ext4 -q -F "$IMAGE"
        mkdir -p "$MOUNT"
        mount -o loop,nodiscard "$IMAGE" "$MOUNT"
    fi
    for cluster in "${CLUSTERS[@]}"; do
        data=${cluster%%:*} port=${cluster##*:}
        mkdir -p "$(dirname "$data")"
        chown postgres "$(dirname "$data")"
        [ -d "$data" ] || as_postgres "$BIN/initdb -D $data -A trust -U postgres >/dev/null"
        as_postgres "$BIN/pg_ctl -D $data -l $data.log -w -o '-p $port $OPTIONS' start >/dev/null"
        psql -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE test" 2>/dev/null || true
        echo "postgresql://postgres@127.0.0.1:$port/test (data in $data)"
    done
    ;;
stop)
    for cluster in "${CLUSTERS[@]}"; do
        data=${cluster%%:*}
        [ -d "$data" ] && as_postgres "$BIN/pg_ctl -D $data -m fast stop >/dev/null" || true
    done
    if mountpoint -q "$MOUNT"; then umount "$MOUNT"; fi
    rmdir "$MOUNT" 2>/dev/null || true
    rm -rf "$IMAGE" "$ON_ROOT"
    ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
