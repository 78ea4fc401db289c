#!/usr/bin/env bash
# Lint gearshift's responses with REDbot (https://redbot.org, from PyPI).
#
# Copies tests/fixtures/docroot to a temp dir, adds generated files (precompressed .gz/.br
# siblings, a 300 KiB binary), starts the built server on a free loopback port for HTTP and
# another for HTTPS (a self-signed certificate made here with openssl), runs `redbot -o har`
# on every fixture URL over both, and fails listing each finding of level BAD.
#
# HTTPS: REDbot's client (thor) does not verify certificates (its TLS context sets
# check_hostname=False and CERT_NONE), so a self-signed one needs no CA passed; it connects
# to https://127.0.0.1:PORT/ (no SNI for an IP: the server's default certificate answers).
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

# A self-signed certificate for the HTTPS listener (REDbot does not verify it, see above).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>"$work/openssl.err" ||
    { log "openssl could not make a certificate"; cat "$work/openssl.err" >&2; exit 1; }
cat >"$work/gearshift.toml" <<EOF
listen = "127.0.0.1:0"
workers = 2
[log]
access = "off"
[tls]
listen = "127.0.0.1:0"
[[tls.certificate]]
cert = "$work/cert.pem"
key = "$work/key.pem"
EOF

# Start the server on free ports and read the real ones from its banner
# (`serving DIR on http://A/ and https://B/ (...)`).
"$bin" serve "$root" --config "$work/gearshift.toml" >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
base=
tls_base=
for _ in $(seq 100); do
    if banner=$(head -n 1 "$work/stdout" 2>/dev/null) && [[ $banner == *"https://"* ]]; then
        base=$(sed -E 's#.* on (http://[0-9.]+:[0-9]+)/.*#\1#' <<<"$banner")
        tls_base=$(sed -E 's#.* and (https://[0-9.]+:[0-9]+)/.*#\1#' <<<"$banner")
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $base || -z $tls_base ]]; then
    log "server did not start"
    cat "$work/stderr" >&2
    exit 1
fi
log "server at $base and $tls_base"

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

# Every path over HTTP, then over HTTPS: the same checks, the same verdict required.
urls=()
for b in "$base" "$tls_base"; do
    for path in "${paths[@]}"; do
        urls+=("$b$path")
    done
done

status=0
n=0
for url in "${urls[@]}"; do
    n=$((n + 1))
    out=$work/har-$n.json
    if ! timeout 120 "$venv/bin/redbot" -o har "$url" >"$out" 2>"$work/redbot-$n.err"; then
        log "redbot failed on $url:"
        cat "$work/redbot-$n.err" >&2
        status=1
    fi
done

# Report every BAD note (with subnotes), fetch errors and incomplete responses; and any
# path whose findings over HTTPS differ from those over HTTP (the same server, the same
# answers: TLS must change nothing REDbot sees).
"$py" - "$work" "${urls[@]}" <<'EOF' || status=1
import json, sys
work, urls = sys.argv[1], sys.argv[2:]
bad = errors = differ = 0
def walk(notes, url, status, seen):
    global bad
    for note in notes:
        seen.append((note.get("level", "").upper(), note.get("note_id")))
        if note.get("level", "").upper() == "BAD":
            bad += 1
            print(f"BAD  {url} ({status}): [{note.get('note_id')}] {note.get('summary')}")
        walk(note.get("subnotes", []), url, status, seen)
findings = []
for n, url in enumerate(urls, 1):
    seen = []
    findings.append(seen)
    try:
        with open(f"{work}/har-{n}.json") as f:
            har = json.load(f)
    except (OSError, ValueError) as e:
        errors += 1
        print(f"ERROR {url}: no HAR output ({e})")
        continue
    log = har.get("log", {})
    if "_red_error" in log:
        errors += 1
        print(f"ERROR {url}: {log['_red_error']}")
        continue
    entries = log.get("entries", [])
    if not entries:
        errors += 1
        print(f"ERROR {url}: no complete response")
        continue
    for e in entries:
        seen.append(("STATUS", e["response"]["status"]))
        walk(e.get("_red_messages", []), e["request"]["url"], e["response"]["status"], seen)
# The first half is over HTTP, the second the same paths over HTTPS.
half = len(urls) // 2
for i in range(half):
    plain, tls = sorted(map(str, findings[i])), sorted(map(str, findings[half + i]))
    if plain != tls:
        differ += 1
        only_http = sorted(set(plain) - set(tls))
        only_https = sorted(set(tls) - set(plain))
        print(f"DIFF {urls[half + i]}: only over HTTP {only_http}, only over HTTPS {only_https}")
print(f"redbot: {len(urls)} URLs checked ({half} paths over HTTP and HTTPS), {bad} BAD findings, "
      f"{errors} errors, {differ} paths answered differently over HTTPS")
sys.exit(1 if bad or errors or differ else 0)
EOF

if ! kill -0 "$server_pid" 2>/dev/null; then
    log "the server died during the checks"
    cat "$work/stderr" >&2
    status=1
fi
exit $status
