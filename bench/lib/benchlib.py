#!/usr/bin/env python3
"""Parsing and arithmetic for the bench/ scripts (stdlib only).

Subcommands:
  freeport                      print a free TCP port on 127.0.0.1
  tree PID                      print PID and all its descendants, one a line
  cpu PID                       print CPU microseconds (utime+stime) of PID and descendants
  cpu-all PID                   like cpu, plus the reaped children (cutime+cstime): CGI scripts
  rss PID                       print VmRSS KiB summed over PID and descendants
  user ROOT_PID                 utime alone of the tree, us (bench/static's user-time column)
  static-report DIR             tables from DIR/runs.tsv and DIR/wrk-*.txt (bench/static)
  strace-report FILE REQUESTS   syscalls per request from an `strace -c` summary
"""

import json
import os
import re
import socket
import statistics
import sys

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- processes

def _stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rindex(")") + 2:].split()
    return rest  # rest[0] is field 3 (state)


def tree(root):
    """root and all descendants (scan of /proc ppid links)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid = int(_stat_fields(name)[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [int(root)]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _tree_us(root, first, last):
    """/proc/PID/stat fields first..last (0-based after the command) summed over root and
    its descendants, in microseconds. A process's fields count all its threads, live and
    exited."""
    ticks = 0
    for p in tree(root):
        try:
            f = _stat_fields(p)
        except OSError:
            continue
        ticks += sum(int(v) for v in f[first:last + 1])
    return ticks * 1_000_000 // CLK_TCK


def cpu_us(root):
    """utime+stime (fields 14, 15) of root and descendants, in microseconds."""
    return _tree_us(root, 11, 12)


def user_us(root):
    """utime (field 14) alone of root and descendants, in microseconds: the part of
    cpu_us spent in the server's own code (the rest is the kernel's: system calls, TCP)."""
    return _tree_us(root, 11, 11)


def cpu_all_us(root):
    """utime+stime+cutime+cstime (fields 14-17) of root and descendants, in microseconds:
    also the CPU of reaped children (CGI scripts), which plain cpu_us misses."""
    return _tree_us(root, 11, 14)


def rss_kib(root):
    total = 0
    for p in tree(root):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def freeport():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------- wrk

_UNITS_TIME = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_UNITS_SIZE = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def _ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * _UNITS_TIME[m.group(2)] if m else None


def _bytes(text):
    m = re.fullmatch(r"([\d.]+)([KMGT]?B)", text)
    return float(m.group(1)) * _UNITS_SIZE[m.group(2)] if m else None


def parse_wrk(text):
    r = {"requests": None, "seconds": None, "bytes": None, "rps": None,
         "p50_ms": None, "p99_ms": None, "errors": 0, "non2xx": 0}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m), ([\d.]+[KMGT]?B) read", text)
    if m:
        r["requests"] = int(m.group(1))
        r["seconds"] = _ms(m.group(2) + m.group(3)) / 1e3
        r["bytes"] = _bytes(m.group(4))
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"Latency Distribution(.*?)(\n\s*\d+ requests|\Z)", text, re.S)
    if m:
        for pct, val in re.findall(r"(\d+)%\s+([\d.]+\w+)", m.group(1)):
            if pct == "50":
                r["p50_ms"] = _ms(val)
            if pct == "99":
                r["p99_ms"] = _ms(val)
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["errors"] = sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        r["non2xx"] = int(m.group(1))
    return r


# ---------------------------------------------------------------- static report

SIZE_ORDER = {"1k": (0, "1 KiB"), "10k": (1, "10 KiB"), "1m": (2, "1 MiB")}


def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def static_report(d):
    runs = []
    with open(os.path.join(d, "runs.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            server, size, rnd, cpu0, cpu1, rc = fields[:6]
            # Older runs.tsv files have no user-time columns.
            user0, user1 = (fields[6], fields[7]) if len(fields) >= 8 else (None, None)
            with open(os.path.join(d, f"wrk-{server}-{size}-{rnd}.txt")) as wf:
                w = parse_wrk(wf.read())
            w.update(server=server, size=size, round=int(rnd), rc=int(rc),
                     cpu_us=int(cpu1) - int(cpu0))
            reqs = w["requests"]
            w["cpu_per_req"] = w["cpu_us"] / reqs if reqs else None
            w["user_per_req"] = ((int(user1) - int(user0)) / reqs
                                 if reqs and user0 is not None else None)
            w["mib_s"] = w["bytes"] / w["seconds"] / 2**20 if w["bytes"] and w["seconds"] else None
            # Share of one CPU the server used over the run: ~100 means the server was the
            # bottleneck; well below means the client (or other load on the machine) was.
            w["busy_pct"] = 100 * w["cpu_us"] / (w["seconds"] * 1e6) if w["seconds"] else None
            runs.append(w)

    print("Per run (rps = wrk Requests/sec; cpu us/req = server utime+stime / wrk requests;")
    print("srv cpu% = server CPU time / run time, 100 = one core fully busy)")
    print(f"{'size':>5} {'rnd':>3} {'server':<10} {'requests':>9} {'rps':>10} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'cpu us/req':>10} {'srv cpu%':>8} {'MiB/s':>8} {'errors':>6}")
    for w in sorted(runs, key=lambda w: (SIZE_ORDER.get(w["size"], (9,))[0], w["round"], w["server"])):
        errs = w["errors"] + w["non2xx"] + (1 if w["rc"] else 0)
        print(f"{w['size']:>5} {w['round']:>3} {w['server']:<10} {_fmt(w['requests'], 'd'):>9} "
              f"{_fmt(w['rps'], '.0f'):>10} {_fmt(w['p50_ms'], '.3f'):>8} {_fmt(w['p99_ms'], '.3f'):>8} "
              f"{_fmt(w['cpu_per_req'], '.2f'):>10} {_fmt(w['busy_pct'], '.0f'):>8} "
              f"{_fmt(w['mib_s'], '.1f'):>8} {errs:>6}")
    print()

    problems = []
    summary = {}
    for size in sorted({w["size"] for w in runs}, key=lambda s: SIZE_ORDER.get(s, (9,))[0]):
        label = SIZE_ORDER.get(size, (9, size))[1]
        print(f"== {label} file (/{size}.bin), median of rounds ==")
        hdr = (f"{'server':<12} {'rounds':>6} {'req/s':>10} {'p99 ms':>8} {'cpu us/req':>10}"
               f" {'user us/req':>11}")
        if size == "1m":
            hdr += f" {'MiB/s':>9}"
        hdr += f" {'errors':>6}"
        print(hdr)
        med = {}
        servers = sorted({w["server"] for w in runs}, key=lambda x: (x.startswith("gs-") or x == "gearshift", x))
        for server in servers:
            ws = [w for w in runs if w["size"] == size and w["server"] == server]
            if not ws:
                continue

            def mdn(key):
                vals = [w[key] for w in ws if w[key] is not None]
                return statistics.median(vals) if vals else None

            m = {k: mdn(k) for k in ("rps", "p99_ms", "cpu_per_req", "user_per_req", "mib_s")}
            errs = sum(w["errors"] + w["non2xx"] + (1 if w["rc"] else 0) for w in ws)
            if errs:
                problems.append(f"{server} {label}: {errs} socket errors / non-2xx / wrk failures")
            if any(w["requests"] is None for w in ws):
                problems.append(f"{server} {label}: a wrk run produced no result")
            med[server] = m
            line = (f"{server:<12} {len(ws):>6} {_fmt(m['rps'], '.0f'):>10} {_fmt(m['p99_ms'], '.3f'):>8} "
                    f"{_fmt(m['cpu_per_req'], '.2f'):>10} {_fmt(m['user_per_req'], '.2f'):>11}")
            if size == "1m":
                line += f" {_fmt(m['mib_s'], '.1f'):>9}"
            line += f" {errs:>6}"
            print(line)

        def ratio(a, b):
            return a / b if a is not None and b else None

        # `floor` (bench/floor) is neither a peer nor ours: it only bounds what any could reach.
        peers = {k: v for k, v in med.items()
                 if not (k.startswith("gs-") or k in ("gearshift", "floor"))}
        ours = {k: v for k, v in med.items() if k not in peers and k != "floor"}
        fast = max((k for k in peers if peers[k]["rps"]), key=lambda k: peers[k]["rps"], default=None)
        lean = min((k for k in peers if peers[k]["cpu_per_req"]), key=lambda k: peers[k]["cpu_per_req"],
                   default=None)
        summary[size] = {"servers": med, "fastest_peer": fast, "leanest_peer": lean, "ratios": {}}
        if fast and lean:
            print(f"best peers: {fast} by req/s, {lean} by cpu us/req")
            for g, m in ours.items():
                rr = ratio(m["rps"], peers[fast]["rps"])
                cr = ratio(m["cpu_per_req"], peers[lean]["cpu_per_req"])
                summary[size]["ratios"][g] = {"rps_vs_fastest": rr, "cpu_vs_leanest": cr}
                print(f"{g:<12} req/s {_fmt(rr, '.2f')}x {fast}'s, cpu/req {_fmt(cr, '.2f')}x {lean}'s")
            if "floor" in med:
                cr = ratio(med["floor"]["cpu_per_req"], peers[lean]["cpu_per_req"])
                summary[size]["floor_cpu_vs_leanest"] = cr
                print(f"{'floor':<12} cpu/req {_fmt(cr, '.2f')}x {lean}'s: no epoll server can go lower here")
        print()
    print("req/s ratio > 1: gearshift serves more; cpu ratio < 1: gearshift spends less CPU per request.")
    print("user us/req: the part of cpu us/req in the server's own code; the rest is the kernel's")
    print("(system calls, the TCP stack), which every server pays alike for one recv and one send.")
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump({"runs": runs, "summary": summary}, f, indent=1)
    if problems:
        print()
        for p in problems:
            print("WARNING:", p)
    return 0


# ---------------------------------------------------------------- strace

def parse_strace_c(text):
    """{syscall: (calls, errors)} from an `strace -c` table."""
    out = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 5 or not re.fullmatch(r"[\d.]+", cols[0]):
            continue
        name = cols[-1]
        if name == "total":
            continue
        # % time, seconds, usecs/call, calls, [errors], syscall
        nums = cols[1:-1]
        try:
            calls = int(nums[2])
            errors = int(nums[3]) if len(nums) > 3 else 0
        except (ValueError, IndexError):
            continue
        c, e = out.get(name, (0, 0))
        out[name] = (c + calls, e + errors)
    return out


EPOLL_WAITS = ("epoll_wait", "epoll_pwait", "epoll_pwait2")
# Calls made once per connection (open, set-up, tear-down), amortised over its requests.
PER_CONNECTION = ("accept", "accept4", "close", "shutdown", "setsockopt", "getsockopt",
                  "getsockname", "getpeername", "epoll_ctl")


def strace_report(path, requests, target=2.0, connections=None):
    with open(path) as f:
        calls = parse_strace_c(f.read())
    requests = int(requests)
    if not calls:
        print("no strace summary found in", path)
        return 1
    print(f"{'syscall':<20} {'calls':>9} {'errors':>7} {'per request':>12}")
    total = waits = conn = 0
    for name, (c, e) in sorted(calls.items(), key=lambda kv: -kv[1][0]):
        mark = " (per connection)" if name in PER_CONNECTION else ""
        print(f"{name:<20} {c:>9} {e:>7} {c / requests:>12.3f}{mark}")
        total += c
        if name in EPOLL_WAITS:
            waits += c
        if name in PER_CONNECTION:
            conn += c
    print(f"{'-' * 20} {'-' * 9} {'-' * 7} {'-' * 12}")
    print(f"{'all':<20} {total:>9} {'':>7} {total / requests:>12.3f}")
    print(f"{'epoll_wait*':<20} {waits:>9} {'':>7} {waits / requests:>12.3f}")
    besides = (total - waits) / requests
    steady = (total - waits - conn) / requests
    print(f"{'besides epoll_wait':<20} {total - waits:>9} {'':>7} {besides:>12.3f}")
    print(f"{'  and per-conn calls':<20} {total - waits - conn:>9} {'':>7} {steady:>12.3f}")
    print()
    # Tolerance for calls that are neither per request nor per connection set-up: a final
    # read of EOF per connection, timed cache revalidation (stat), the main thread's wakeups.
    verdict = "OK" if steady <= target * 1.01 else "OVER TARGET"
    conns = f" over {connections} connections" if connections else ""
    print(f"requests: {requests}{conns}; syscalls per keep-alive request besides epoll_wait: {besides:.3f}, "
          f"without per-connection set-up/tear-down: {steady:.3f} (target <= {target:g}, 1% tolerance): {verdict}")
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "freeport":
        print(freeport())
    elif cmd == "tree":
        print("\n".join(map(str, tree(args[0]))))
    elif cmd == "cpu":
        print(cpu_us(args[0]))
    elif cmd == "user":
        print(user_us(args[0]))
    elif cmd == "cpu-all":
        print(cpu_all_us(args[0]))
    elif cmd == "rss":
        print(rss_kib(args[0]))
    elif cmd == "wrk":
        with open(args[0]) as f:
            print(json.dumps(parse_wrk(f.read())))
    elif cmd == "static-report":
        return static_report(args[0])
    elif cmd == "strace-report":
        return strace_report(args[0], args[1], float(args[2]) if len(args) > 2 else 2.0,
                             args[3] if len(args) > 3 else None)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
