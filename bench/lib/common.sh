# Shared helpers for the bench/ scripts. Sourced, not executed.
# shellcheck shell=bash

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$BENCH_DIR/.." && pwd)
BENCH_PY="$BENCH_DIR/lib/benchlib.py"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# bench_install CMD:PKG[|PKG2] ...  — apt-get install the packages whose command is missing.
# PKG|PKG2 means: try PKG, fall back to PKG2 (nginx-light | nginx).
bench_install() {
    local pair cmd pkgs missing=()
    for pair in "$@"; do
        cmd=${pair%%:*}
        pkgs=${pair#*:}
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkgs")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} and not root: install them first"
    if [ -z "${BENCH_APT_UPDATED:-}" ]; then
        log "apt-get update (missing: ${missing[*]})"
        timeout 300 apt-get update -qq >/dev/null || log "warning: apt-get update failed"
        BENCH_APT_UPDATED=1
    fi
    local alt p ok
    for alt in "${missing[@]}"; do
        ok=
        IFS='|' read -r -a cands <<<"$alt"
        for p in "${cands[@]}"; do
            log "apt-get install $p"
            if DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends "$p" >/dev/null; then
                ok=1; break
            fi
        done
        [ -n "$ok" ] || die "could not install any of: $alt"
    done
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || die "${pair%%:*} still missing after install"
    done
}

# Sets GEARSHIFT_BIN: the env value if given, else builds the workspace with cargo.
bench_gearshift_bin() {
    if [ -n "${GEARSHIFT_BIN:-}" ]; then
        [ -x "$GEARSHIFT_BIN" ] || die "GEARSHIFT_BIN=$GEARSHIFT_BIN is not executable"
    else
        log "building gearshift (cargo build --release); set GEARSHIFT_BIN to skip"
        (cd "$REPO_ROOT" && timeout 1800 cargo build --release -p gearshift) >&2 || die "cargo build failed"
        GEARSHIFT_BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/gearshift"
        [ -x "$GEARSHIFT_BIN" ] || die "no binary at $GEARSHIFT_BIN"
    fi
    GEARSHIFT_BIN=$(readlink -f "$GEARSHIFT_BIN")
    export GEARSHIFT_BIN
}

# Re-executes the calling script under `timeout` so the whole run is bounded.
# Call after the (unbounded-time) install and build steps: bench_bound SECONDS "$0" "$@"
bench_bound() {
    local secs=$1 script=$2; shift 2
    if [ -z "${BENCH_BOUNDED:-}" ]; then
        export BENCH_BOUNDED=1 BENCH_APT_UPDATED
        log "whole run bounded to ${secs}s"
        exec timeout --foreground -k 10 "$secs" bash "$script" "$@"
    fi
}

# Make the docroot: 1k.bin, 10k.bin, 1m.bin (pseudo-random, incompressible) + index.html.
bench_docroot() {
    local root=$1
    mkdir -p "$root"
    head -c 1024 /dev/urandom >"$root/1k.bin"
    head -c 10240 /dev/urandom >"$root/10k.bin"
    head -c 1048576 /dev/urandom >"$root/1m.bin"
    echo '<!doctype html><title>bench</title>' >"$root/index.html"
    chmod -R a+rX "$root"
}

# Waits until http://127.0.0.1:PORT/PATH answers 200 (curl), up to 10 s.
bench_wait_http() {
    local port=$1 path=${2:-/1k.bin} i
    for i in $(seq 1 100); do
        if [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port$path" 2>/dev/null)" = 200 ]; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# bench_start_gearshift DOCROOT LOGFILE [PIN_CPU] [extra args...]
# Sets GS_PID and GS_PORT. Listens on 127.0.0.1:0 and reads the port from the banner.
bench_start_gearshift() {
    local root=$1 logf=$2 cpu=${3:-}; shift 3 || shift $#
    local pre=()
    [ -n "$cpu" ] && pre=(taskset -c "$cpu")
    "${pre[@]}" "$GEARSHIFT_BIN" serve "$root" --listen 127.0.0.1:0 --workers 1 --access-log off "$@" \
        >"$logf" 2>&1 </dev/null &
    GS_PID=$!
    local i line
    GS_PORT=
    for i in $(seq 1 100); do
        line=$(head -n 1 "$logf" 2>/dev/null || true)
        if [[ $line =~ http://127\.0\.0\.1:([0-9]+)/ ]]; then
            GS_PORT=${BASH_REMATCH[1]}
            break
        fi
        kill -0 "$GS_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$GS_PORT" ]; then
        log "gearshift did not start; its output:"
        sed 's/^/    /' "$logf" >&2
        return 1
    fi
    log "gearshift pid $GS_PID port $GS_PORT: $(head -n 1 "$logf")"
    bench_wait_http "$GS_PORT" || { log "gearshift does not answer GET /1k.bin with 200"; curl -sv -m 2 "http://127.0.0.1:$GS_PORT/1k.bin" -o /dev/null >&2 || true; return 1; }
}

# bench_nginx_conf DIR DOCROOT PORT CONNS RLIMIT  -> writes DIR/nginx.conf
bench_nginx_conf() {
    local dir=$1 root=$2 port=$3 conns=${4:-1024} rlimit=${5:-}
    mkdir -p "$dir/tmp"
    {
        echo "user root;"
        echo "worker_processes 1;"
        echo "daemon off;"
        echo "master_process on;"
        echo "pid $dir/nginx.pid;"
        echo "error_log $dir/error.log warn;"
        [ -n "$rlimit" ] && echo "worker_rlimit_nofile $rlimit;"
        echo "events { worker_connections $conns; }"
        echo "http {"
        echo "    default_type application/octet-stream;"
        echo "    access_log off;"
        echo "    sendfile on;"
        echo "    tcp_nopush on;"
        echo "    open_file_cache max=1000 inactive=20s;"
        echo "    open_file_cache_valid 60s;"
        echo "    keepalive_requests 100000;"
        echo "    keepalive_timeout 75s;"
        echo "    client_body_temp_path $dir/tmp/body;"
        echo "    proxy_temp_path $dir/tmp/proxy;"
        echo "    fastcgi_temp_path $dir/tmp/fastcgi;"
        echo "    uwsgi_temp_path $dir/tmp/uwsgi;"
        echo "    scgi_temp_path $dir/tmp/scgi;"
        echo "    server {"
        echo "        listen 127.0.0.1:$port;"
        echo "        server_name localhost;"
        echo "        root $root;"
        echo "        location / { }"
        echo "    }"
        echo "}"
    } >"$dir/nginx.conf"
    # Drop *_temp_path directives of modules this nginx build lacks (nginx-light has fewer).
    local i out bad
    for i in 1 2 3 4 5 6; do
        out=$(nginx -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" 2>&1) && return 0
        bad=$(sed -n 's/.*unknown directive "\([a-z_]*\)".*/\1/p' <<<"$out" | head -n 1)
        [ -n "$bad" ] || { log "nginx -t failed: $out"; return 1; }
        sed -i "/^ *$bad /d" "$dir/nginx.conf"
    done
    return 1
}

# bench_start_nginx DIR DOCROOT LOGFILE [PIN_CPU] [CONNS] [RLIMIT]. Sets NGX_PID (master), NGX_PORT.
bench_start_nginx() {
    local dir=$1 root=$2 logf=$3 cpu=${4:-} conns=${5:-1024} rlimit=${6:-}
    local pre=() try
    [ -n "$cpu" ] && pre=(taskset -c "$cpu")
    mkdir -p "$dir"
    for try in 1 2 3; do
        NGX_PORT=$(python3 "$BENCH_PY" freeport)
        bench_nginx_conf "$dir" "$root" "$NGX_PORT" "$conns" "$rlimit" || return 1
        "${pre[@]}" nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$logf" 2>&1 </dev/null &
        NGX_PID=$!
        if bench_wait_http "$NGX_PORT"; then
            log "nginx master pid $NGX_PID port $NGX_PORT ($(nginx -v 2>&1))"
            return 0
        fi
        kill "$NGX_PID" 2>/dev/null; wait "$NGX_PID" 2>/dev/null
        log "nginx start attempt $try failed: $(tail -n 3 "$dir/error.log" 2>/dev/null)"
    done
    return 1
}

# Stops a server we started (by pid) and waits for it, bounded.
bench_stop() {
    local pid=$1 i
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

bench_machine_note() {
    echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# gearshift: $GEARSHIFT_BIN ($(cd "$REPO_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$REPO_ROOT" && [ -n "$(git status --porcelain -- crates 2>/dev/null)" ] && echo ', dirty tree'))"
}

# bench_run CMD...: runs CMD in the background and waits for it, so a TERM/INT trap fires at
# once (bash defers traps while a foreground child runs); bench_kill_child ends it.
BENCH_CHILD=
bench_run() {
    local rc=0
    "$@" &
    BENCH_CHILD=$!
    wait "$BENCH_CHILD" || rc=$?
    BENCH_CHILD=
    return $rc
}
bench_kill_child() {
    if [ -n "${BENCH_CHILD:-}" ]; then
        kill -TERM "$BENCH_CHILD" 2>/dev/null || true
        wait "$BENCH_CHILD" 2>/dev/null || true
        BENCH_CHILD=
    fi
}
