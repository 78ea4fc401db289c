# bench/lib/peers.sh — lighttpd and h2o (Debian's packages) as static-file peers beside nginx,
# configured as bench/static runs nginx: one worker, keep-alive without a request limit that a
# run could reach, no access log, sendfile where the server has it. Sourced after common.sh.

# bench_start_lighttpd DIR DOCROOT LOGFILE [PIN_CPU]. Sets LT_PID, LT_PORT.
bench_start_lighttpd() {
    local dir=$1 root=$2 logf=$3 cpu=${4:-} pre=() try
    [ -n "$cpu" ] && pre=(taskset -c "$cpu")
    mkdir -p "$dir"
    for try in 1 2 3; do
        LT_PORT=$(python3 "$BENCH_PY" freeport)
        # One process (server.max-worker 0), linux-sendfile and epoll are lighttpd's defaults.
        cat >"$dir/lighttpd.conf" <<CONF
server.document-root = "$root"
server.bind = "127.0.0.1"
server.port = $LT_PORT
server.errorlog = "$dir/error.log"
server.max-keep-alive-requests = 1000000
server.max-connections = 1024
mimetype.assign = ( "" => "application/octet-stream" )
CONF
        "${pre[@]}" lighttpd -D -f "$dir/lighttpd.conf" >"$logf" 2>&1 </dev/null &
        LT_PID=$!
        if bench_wait_http "$LT_PORT"; then
            log "lighttpd pid $LT_PID port $LT_PORT ($(lighttpd -v 2>&1 | cut -d' ' -f1))"
            return 0
        fi
        kill "$LT_PID" 2>/dev/null; wait "$LT_PID" 2>/dev/null
        log "lighttpd start attempt $try failed: $(tail -n 3 "$dir/error.log" 2>/dev/null)"
    done
    return 1
}

# bench_start_h2o DIR DOCROOT LOGFILE [PIN_CPU]. Sets H2O_PID, H2O_PORT. As root h2o drops to
# `nobody`: the docroot must be world-readable.
bench_start_h2o() {
    local dir=$1 root=$2 logf=$3 cpu=${4:-} pre=() try user=()
    [ -n "$cpu" ] && pre=(taskset -c "$cpu")
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && user=("user: nobody")
    for try in 1 2 3; do
        H2O_PORT=$(python3 "$BENCH_PY" freeport)
        # num-threads 1: one event loop; no access-log directive: no access log.
        cat >"$dir/h2o.conf" <<CONF
listen:
  host: 127.0.0.1
  port: $H2O_PORT
num-threads: 1
max-connections: 1024
${user[*]}
error-log: $dir/error.log
hosts:
  default:
    paths:
      /:
        file.dir: $root
CONF
        "${pre[@]}" h2o -c "$dir/h2o.conf" >"$logf" 2>&1 </dev/null &
        H2O_PID=$!
        if bench_wait_http "$H2O_PORT"; then
            log "h2o pid $H2O_PID port $H2O_PORT ($(h2o -v 2>&1 | head -n 1))"
            return 0
        fi
        kill "$H2O_PID" 2>/dev/null; wait "$H2O_PID" 2>/dev/null
        log "h2o start attempt $try failed: $(tail -n 3 "$dir/error.log" 2>/dev/null)"
    done
    return 1
}

# bench_start_floor WORK [PIN_CPU]: bench/floor/floor.c (no HTTP at all: the kernel's floor for
# a keep-alive answer), built with cc. Sets FLOOR_PID, FLOOR_PORT.
bench_start_floor() {
    local work=$1 cpu=${2:-} pre=() i
    [ -n "$cpu" ] && pre=(taskset -c "$cpu")
    cc -O2 -o "$work/floor" "$BENCH_DIR/floor/floor.c" || return 1
    "${pre[@]}" "$work/floor" >"$work/floor.out" 2>&1 </dev/null &
    FLOOR_PID=$!
    FLOOR_PORT=
    for i in $(seq 1 50); do
        FLOOR_PORT=$(sed -n 's/^port //p' "$work/floor.out")
        [ -n "$FLOOR_PORT" ] && break
        sleep 0.1
    done
    [ -n "$FLOOR_PORT" ] || { log "floor did not start: $(cat "$work/floor.out")"; return 1; }
    log "floor pid $FLOOR_PID port $FLOOR_PORT"
}

# bench_start_server SERVER WORK CPU GS_CONFIG: nginx, lighttpd, h2o or gs-ENGINE (gearshift
# with that engine and config file), pinned to CPU, serving WORK/root. Sets SRV_PID, SRV_PORT.
bench_start_server() {
    local srv=$1 work=$2 cpu=$3 gs_config=$4
    case $srv in
        nginx)
            bench_start_nginx "$work/nginx" "$work/root" "$work/nginx.out" "$cpu" 1024 || return 1
            SRV_PORT=$NGX_PORT SRV_PID=$NGX_PID ;;
        lighttpd)
            bench_start_lighttpd "$work/lighttpd" "$work/root" "$work/lighttpd.out" "$cpu" || return 1
            SRV_PORT=$LT_PORT SRV_PID=$LT_PID ;;
        h2o)
            bench_start_h2o "$work/h2o" "$work/root" "$work/h2o.out" "$cpu" || return 1
            SRV_PORT=$H2O_PORT SRV_PID=$H2O_PID ;;
        floor)
            bench_start_floor "$work" "$cpu" || return 1
            SRV_PORT=$FLOOR_PORT SRV_PID=$FLOOR_PID ;;
        gs-*)
            bench_start_gearshift "$work/root" "$work/$srv.out" "$cpu" --config "$gs_config" \
                --engine "${srv#gs-}" || return 1
            SRV_PORT=$GS_PORT SRV_PID=$GS_PID ;;
        *) return 1 ;;
    esac
}
