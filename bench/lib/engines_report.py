#!/usr/bin/env python3
"""/proc sampling and the report of bench/engines (stdlib only; reuses benchlib.py).

Subcommands:
  cpu PID            print "CPU_US NPROCS NTHREADS" for PID's process tree. CPU_US sums
                     utime+stime+cutime+cstime of PID and every live descendant (ppid links in
                     /proc/*/stat), so processes that exited and were reaped still count (in
                     their reaper's cutime/cstime), and each process counts all its threads.
  mem PID            print "RSS_KIB PSS_KIB NPROCS NTHREADS" (VmRSS and smaps_rollup Pss summed)
  idle ARGS...       lib/idle_client.py ARGS, also recording PSS, process and thread counts at
                     the moment it reads RSS with the connections open; prints one JSON line
  idle-line FILE     one-line summary of an idle-*.json file
  report DIR         tables from DIR/runs.tsv, DIR/wrk-*.txt, DIR/idle-*.json, DIR/servers.tsv
"""

import io
import json
import os
import statistics
import sys
from contextlib import redirect_stdout

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import _stat_fields, parse_wrk, tree, CLK_TCK  # noqa: E402


# ---------------------------------------------------------------- /proc

def cpu_snapshot(root):
    ticks = nprocs = nthreads = 0
    for p in tree(root):
        try:
            f = _stat_fields(p)
        except OSError:
            continue
        # fields 14-17: utime stime cutime cstime; field 20: num_threads (rest[0] is field 3)
        ticks += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
        nprocs += 1
        nthreads += int(f[17])
    return ticks * 1_000_000 // CLK_TCK, nprocs, nthreads


def pss_kib(root, only_root=False, fields=("Pss:",)):
    """FIELDS of smaps_rollup summed over ROOT's tree (or ROOT alone), in KiB."""
    total = 0
    for p in ([root] if only_root else tree(root)):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(fields):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


USS = ("Private_Clean:", "Private_Dirty:")


def per_child(reading, what="pss"):
    """PSS (or USS) per child process: the tree's without its root's, over the other processes; or None."""
    if reading.get(f"root_{what}_kib") is None or reading.get("procs", 0) < 2:
        return None
    return (reading[f"{what}_kib"] - reading[f"root_{what}_kib"]) / (reading["procs"] - 1)


def _fmt_child(v):
    return "-" if v is None else f"{v:.0f}"


def mem_snapshot(root):
    _, nprocs, nthreads = cpu_snapshot(root)
    return benchlib.rss_kib(root), pss_kib(root), nprocs, nthreads


def idle(args):
    """Run idle_client.main() with ARGS; wrap its RSS reader to also take PSS etc."""
    import idle_client
    readings = []
    orig = idle_client.rss_kib

    def rss_and_more(pid):
        rss = orig(pid)
        _, nprocs, nthreads = cpu_snapshot(pid)
        readings.append({"rss_kib": rss, "pss_kib": pss_kib(pid), "root_pss_kib": pss_kib(pid, only_root=True),
                         "uss_kib": pss_kib(pid, fields=USS), "root_uss_kib": pss_kib(pid, only_root=True, fields=USS),
                         "procs": nprocs, "threads": nthreads})
        return rss

    idle_client.rss_kib = rss_and_more
    sys.argv = ["idle_client.py"] + list(args)
    buf = io.StringIO()
    try:
        with redirect_stdout(buf):
            rc = idle_client.main()
    except Exception as e:  # noqa: BLE001 - report any client failure as a result line
        rc = 1
        print(f"idle client failed: {type(e).__name__}: {e}", file=sys.stderr)
    line = buf.getvalue().strip()
    out = {"rc": rc, "line": line}
    cols = line.split()
    if len(cols) >= 10:
        out.update(conns=int(cols[1]), open=int(cols[2]), open_s=float(cols[8]), meas_s=float(cols[9]))
    if len(readings) >= 1:
        out["before"] = readings[0]
    if len(readings) >= 2:
        out["after"] = readings[1]
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------- report

SIZE_LABEL = {"1k": "1 KiB", "10k": "10 KiB", "1m": "1 MiB"}
SIZE_ORDER = {"1k": 0, "10k": 1, "1m": 2}


def _f(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _ratio(a, b):
    return a / b if a is not None and b else None


def _x(v):
    return "-" if v is None else f"{v:.2f}x"


def load_runs(d):
    runs = []
    with open(os.path.join(d, "runs.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            server, size, rnd, cpu0, cpu1, p0, p1, rc = line.split()
            with open(os.path.join(d, f"wrk-{server}-{size}-{rnd}.txt")) as wf:
                w = parse_wrk(wf.read())
            w.update(server=server, size=size, round=int(rnd), rc=int(rc), cpu_us=int(cpu1) - int(cpu0),
                     procs=f"{p0}->{p1}")
            reqs = w["requests"]
            w["cpu_per_req"] = w["cpu_us"] / reqs if reqs else None
            w["req_per_cpu_s"] = reqs / (w["cpu_us"] / 1e6) if reqs and w["cpu_us"] > 0 else None
            w["busy_pct"] = 100 * w["cpu_us"] / (w["seconds"] * 1e6) if w["seconds"] else None
            w["errs"] = w["errors"] + w["non2xx"] + (1 if w["rc"] else 0)
            runs.append(w)
    return runs


def load_servers(d):
    """servers.tsv: name, twins (comma-separated or -), kind, note (tab-separated), in display order."""
    servers = []
    with open(os.path.join(d, "servers.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, twin, kind, note = (line.rstrip("\n").split("\t") + ["", "", ""])[:4]
            twins = [t for t in twin.split(",") if t and t != "-"]
            servers.append({"name": name, "twins": twins, "kind": kind, "note": note})
    return servers


def load_idle(d, name):
    p = os.path.join(d, f"idle-{name}.json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        text = f.read().strip().splitlines()
    try:
        return json.loads(text[-1]) if text else None
    except json.JSONDecodeError:
        return None


def report(d, header=""):
    runs = load_runs(d)
    servers = load_servers(d)
    names = [s["name"] for s in servers]
    sizes = sorted({w["size"] for w in runs}, key=lambda s: SIZE_ORDER.get(s, 9))
    problems = []

    # medians per (server, size)
    med = {}
    for name in names:
        for size in sizes:
            ws = [w for w in runs if w["server"] == name and w["size"] == size]
            if not ws:
                continue

            def mdn(key):
                vals = [w[key] for w in ws if w[key] is not None]
                return statistics.median(vals) if vals else None

            m = {k: mdn(k) for k in ("rps", "p99_ms", "cpu_per_req", "req_per_cpu_s", "busy_pct")}
            m["n"] = len(ws)
            m["errs"] = sum(w["errs"] for w in ws)
            if m["errs"]:
                problems.append(f"{name} {size}: {m['errs']} socket errors / non-2xx / wrk failures")
            if any(w["requests"] is None for w in ws):
                problems.append(f"{name} {size}: a wrk run produced no result")
            changed = [w["procs"] for w in ws if w["procs"].split("->")[0] != w["procs"].split("->")[1]]
            if changed and not name.startswith(("apache-", "gs-prefork", "gs-worker", "gs-fork")):
                problems.append(f"{name} {size}: process count changed during runs ({', '.join(changed)})")
            med[(name, size)] = m

    if header:
        print(header.rstrip())
    print("Throughput: median of rounds. cpu us/req = server CPU (utime+stime of all its processes,")
    print("plus reaped children's cutime+cstime) / requests; req/cpu-s = requests per CPU second;")
    print("cpu% = server CPU / run time (100 = CPU 0 saturated); vs twin: gearshift / twin.")
    for size in sizes:
        print()
        print(f"== {SIZE_LABEL.get(size, size)} (/{size}.bin) ==")
        print(f"{'server':<15} {'rnds':>4} {'req/s':>9} {'p99 ms':>8} {'cpu us/req':>10} {'req/cpu-s':>10} "
              f"{'cpu%':>5} {'err':>4} | {'twin':<14} {'req/s':>6} {'p99':>6} {'cpu/req':>7} {'req/cpu-s':>9}")
        for s in servers:
            m = med.get((s["name"], size))
            if m is None:
                print(f"{s['name']:<15} {'':>4} {'skipped: ' + s['note'] if s['note'] else 'no runs'}")
                continue
            line = (f"{s['name']:<15} {m['n']:>4} {_f(m['rps'], '.0f'):>9} {_f(m['p99_ms'], '.3f'):>8} "
                    f"{_f(m['cpu_per_req'], '.2f'):>10} {_f(m['req_per_cpu_s'], '.0f'):>10} "
                    f"{_f(m['busy_pct'], '.0f'):>5} {m['errs']:>4} |")
            for i, twin in enumerate(s["twins"] or [""]):
                if i:
                    line = f"{'':<15} {'':>4} {'':>9} {'':>8} {'':>10} {'':>10} {'':>5} {'':>4} |"
                t = med.get((twin, size)) if twin else None
                if t:
                    line += (f" {twin:<14} {_x(_ratio(m['rps'], t['rps'])):>6} {_x(_ratio(m['p99_ms'], t['p99_ms'])):>6} "
                             f"{_x(_ratio(m['cpu_per_req'], t['cpu_per_req'])):>7} "
                             f"{_x(_ratio(m['req_per_cpu_s'], t['req_per_cpu_s'])):>9}")
                elif twin:
                    line += f" {twin:<14} (not measured)"
                print(line)

    # RSS at N idle keep-alive connections
    idle = {n: load_idle(d, n) for n in names}
    if any(idle.values()):
        conns = next((v.get("conns") for v in idle.values() if v and v.get("conns")), None)
        print()
        print(f"== Memory with {conns or '?'} idle keep-alive connections open (after one GET /1k.bin each) ==")
        print("RSS = VmRSS summed over all server processes (shared pages count once per process);")
        print("PSS = proportional set size summed (shared pages split); KiB = after, and growth over the idle server;")
        print("PSS/child = (PSS - the parent's own PSS) / (processes - 1): what each child (Apache's or prefork's) holds;")
        print("  it falls as children multiply (shared pages split more ways): USS/child (private pages) does not.")
        print(f"{'server':<15} {'conns':>6} {'open':>6} {'procs':>6} {'thrds':>6} {'RSS KiB':>9} {'+RSS':>9} "
              f"{'PSS KiB':>9} {'+PSS':>9} {'PSS/child':>9} {'USS/child':>9} | {'twin':<14} {'RSS':>6} {'PSS':>6} {'/child':>6} {'USS/c':>6}")
        for s in servers:
            v = idle.get(s["name"])
            if not v or "after" not in v:
                why = s["note"] or (v or {}).get("line") or "not measured"
                print(f"{s['name']:<15} {'-':>6} {why}")
                if v is not None:
                    problems.append(f"{s['name']}: idle-connection run failed: {why}")
                continue
            a, b = v["after"], v.get("before", {})
            line = (f"{s['name']:<15} {v.get('conns', 0):>6} {v.get('open', 0):>6} {a['procs']:>6} {a['threads']:>6} "
                    f"{a['rss_kib']:>9} {a['rss_kib'] - b.get('rss_kib', 0):>9} {a['pss_kib']:>9} "
                    f"{a['pss_kib'] - b.get('pss_kib', 0):>9} {_fmt_child(per_child(a)):>9} {_fmt_child(per_child(a, 'uss')):>9} |")
            for i, twin in enumerate(s["twins"] or [""]):
                if i:
                    line = f"{'':<15} {'':>6} {'':>6} {'':>6} {'':>6} {'':>9} {'':>9} {'':>9} {'':>9} {'':>9} {'':>9} |"
                tv = idle.get(twin) if twin else None
                if tv and "after" in tv:
                    ta = tv["after"]
                    line += (f" {twin:<14} {_x(_ratio(a['rss_kib'], ta['rss_kib'])):>6} "
                             f"{_x(_ratio(a['pss_kib'], ta['pss_kib'])):>6} "
                             f"{_x(_ratio(per_child(a), per_child(ta))):>6} "
                             f"{_x(_ratio(per_child(a, 'uss'), per_child(ta, 'uss'))):>6}")
                elif twin:
                    line += f" {twin:<14} (not measured)"
                print(line)
            if v.get("rc"):
                problems.append(f"{s['name']}: idle client: not every connection got its response or stayed open "
                                f"({v.get('conns')} answered, {v.get('open')} open)")


    # Targets of issue 4.
    print()
    print("== Targets ==")
    summary = {"targets": []}

    def target(label, ok, detail):
        verdict = "n/a" if ok is None else ("PASS" if ok else "FAIL")
        print(f"{verdict:<5} {label}: {detail}")
        summary["targets"].append({"target": label, "verdict": verdict, "detail": detail})

    for gs, ap in (("gs-prefork", "apache-prefork"), ("gs-worker", "apache-worker"), ("gs-worker", "apache-event")):
        label = f"{gs} >= 2x {ap} in requests per CPU second"
        rs = {sz: _ratio(med.get((gs, sz), {}).get("req_per_cpu_s"), med.get((ap, sz), {}).get("req_per_cpu_s"))
              for sz in sizes}
        got = {sz: r for sz, r in rs.items() if r is not None}
        if not got:
            why = next((s["note"] for s in servers if s["name"] in (gs, ap) and s["note"]), "not measured")
            target(label, None, why)
        else:
            target(label, all(r >= 2 for r in got.values()),
                   ", ".join(f"{sz} {r:.2f}x" for sz, r in got.items()))
    for gs in ("gs-staged", "gs-pool"):
        label = f"{gs} cpu us/req <= 1.5x gs-event's on cached 1 KiB files"
        r = _ratio(med.get((gs, "1k"), {}).get("cpu_per_req"), med.get(("gs-event", "1k"), {}).get("cpu_per_req"))
        if r is None:
            why = next((s["note"] for s in servers if s["name"] in (gs, "gs-event") and s["note"]), "not measured")
            target(label, None, why)
        else:
            a = med[(gs, "1k")]["cpu_per_req"]
            b = med[("gs-event", "1k")]["cpu_per_req"]
            target(label, r <= 1.5, f"{a:.2f} vs {b:.2f} us/req = {r:.2f}x")
    if any(w["busy_pct"] is not None and w["busy_pct"] < 80 for w in runs):
        print("note: runs with cpu% well below 100 were limited by wrk or by other load on the machine;")
        print("      compare cpu us/req (and req/cpu-s) there rather than req/s.")

    summary.update(medians={f"{k[0]} {k[1]}": v for k, v in med.items()}, idle=idle,
                   runs=runs, servers=servers)
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    if problems:
        print()
        for p in problems:
            print("WARNING:", p)
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "cpu":
        print(*cpu_snapshot(args[0]))
    elif cmd == "mem":
        print(*mem_snapshot(args[0]))
    elif cmd == "idle":
        return idle(args)
    elif cmd == "idle-line":
        v = load_idle(os.path.dirname(args[0]) or ".", os.path.basename(args[0])[5:-5])
        if not v:
            print("no result")
        else:
            a = v.get("after", {})
            print(f"{v.get('conns', '?')} answered, {v.get('open', '?')} open, RSS {a.get('rss_kib', '?')} KiB, "
                  f"PSS {a.get('pss_kib', '?')} KiB, {a.get('procs', '?')} processes, {a.get('threads', '?')} threads, "
                  f"opened in {v.get('open_s', '?')} s")
    elif cmd == "report":
        hdr = ""
        if len(args) > 1 and os.path.exists(args[1]):
            with open(args[1]) as f:
                hdr = f.read()
        return report(args[0], hdr)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
