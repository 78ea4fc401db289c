#!/usr/bin/env bash
# Lint gearshift's responses with REDbot (https://redbot.org, from PyPI).
#
# Copies tests/fixtures/docroot to a temp dir, adds generated files (precompressed .gz/.br
# siblings, a 300 KiB binary), starts the built server on a free loopback port, runs
# `redbot -o har` on every fixture URL and fails listing each finding of level BAD.
#
# Environment:
#   GEARSHIFT_BIN  server binary (default: $CARGO_TARGET_DIR or target/, debug build; built
#                  with `cargo build -p gearshift` when missing)
#   REDBOT_VENV    virtualenv holding redbot (default: <target dir>/redbot-venv)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}
case $target_dir in /*) ;; *) target_dir=$repo/$target_dir ;; esac
bin=${GEARSHIFT_BIN:-$target_dir/debug/gearshift}
venv=${REDBOT_VENV:-$target_dir/redbot-venv}

log() { printf 'redbot: %s\n' "$*" >&2; }

if [[ -z ${GEARSHIFT_BIN:-} ]]; then
    (cd "$repo" && cargo build --quiet -p gearshift)
fi
[[ -x $bin ]] || { log "no server binary at $bin"; exit 1; }

if ! "$venv/bin/redbot" --help >/dev/null 2>&1; then
    log "installing redbot into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check redbot brotli
fi
py=$venv/bin/python

work=$(mktemp -d "${TMPDIR:-/tmp}/gearshift-redbot.XXXXXX")
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The docroot: committed files plus generated ones.
root=$work/docroot
cp -a "$here/../fixtures/docroot" "$root"
gzip -9 -k -n "$root/notes.txt" "$root/style.css"
"$py" - "$root" <<'EOF'
import random, sys
import brotli
root = sys.argv[1]
for name in ("notes.txt", "style.css"):
    with open(f"{root}/{name}", "rb") as f:
        data = f.read()
    with open(f"{root}/{name}.br", "wb") as f:
        f.write(brotli.compress(data, quality=11))
with open(f"{root}/data.bin", "wb") as f:
    f.write(random.Random(300).randbytes(300 * 1024))
EOF

# Start the server on a free port and read the real one from its banner.
"$bin" serve "$root" --listen 127.0.0.1:0 --workers 2 --access-log off \
    >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
base=
for _ in $(seq 100); do
    if banner=$(head -n 1 "$work/stdout" 2>/dev/null) && [[ $banner == *"http://"* ]]; then
        base=$(sed -E 's#.* on (http://[0-9.]+:[0-9]+)/.*#\1#' <<<"$banner")
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $base ]]; then
    log "server did not start"
    cat "$work/stderr" >&2
    exit 1
fi
log "server at $base"

paths=(
    /
    /index.html
    /style.css
    /app.js
    /notes.txt
    /data.bin
    /sub
    /sub/
    /.well-known/security.txt
    /missing.html
)

status=0
n=0
for path in "${paths[@]}"; do
    n=$((n + 1))
    out=$work/har-$n.json
    if ! timeout 120 "$venv/bin/redbot" -o har "$base$path" >"$out" 2>"$work/redbot-$n.err"; then
        log "redbot failed on $path:"
        cat "$work/redbot-$n.err" >&2
        status=1
    fi
done

# Report every BAD note (with subnotes), fetch errors and incomplete responses.
"$py" - "$work" "${paths[@]}" <<'EOF' || status=1
import json, sys
work, paths = sys.argv[1], sys.argv[2:]
bad = errors = 0
def walk(notes, path, status):
    global bad
    for note in notes:
        if note.get("level", "").upper() == "BAD":
            bad += 1
            print(f"BAD  {path} ({status}): [{note.get('note_id')}] {note.get('summary')}")
        walk(note.get("subnotes", []), path, status)
for n, path in enumerate(paths, 1):
    try:
        with open(f"{work}/har-{n}.json") as f:
            har = json.load(f)
    except (OSError, ValueError) as e:
        errors += 1
        print(f"ERROR {path}: no HAR output ({e})")
        continue
    log = har.get("log", {})
    if "_red_error" in log:
        errors += 1
        print(f"ERROR {path}: {log['_red_error']}")
        continue
    entries = log.get("entries", [])
    if not entries:
        errors += 1
        print(f"ERROR {path}: no complete response")
        continue
    for e in entries:
        walk(e.get("_red_messages", []), e["request"]["url"], e["response"]["status"])
print(f"redbot: {len(paths)} URLs checked, {bad} BAD findings, {errors} errors")
sys.exit(1 if bad or errors else 0)
EOF

if ! kill -0 "$server_pid" 2>/dev/null; then
    log "the server died during the checks"
    cat "$work/stderr" >&2
    status=1
fi
exit $status
