#!/usr/bin/env python3
"""Report of bench/cgi: per run and median-of-rounds req/s, p99 and server CPU per request
for each workload, with gearshift/peer ratios. Usage: cgi_report.py RESULTS_DIR (holding
runs.tsv and the wrk-SERVER-WORKLOAD-ROUND.txt outputs)."""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import parse_wrk, _fmt  # noqa: E402

PEERS = {"gearshift": "apache", "gearshift-fcgi": "nginx-fcgi"}


def main(d):
    runs = []
    with open(os.path.join(d, "runs.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            server, work, rnd, cpu0, cpu1, rc = fields[:6]
            # The front-end's own CPU (without php-fpm): columns 7-8, absent in older files.
            front0, front1 = (fields[6], fields[7]) if len(fields) >= 8 else (None, None)
            with open(os.path.join(d, f"wrk-{server}-{work}-{rnd}.txt")) as wf:
                w = parse_wrk(wf.read())
            w.update(server=server, work=work, round=int(rnd), rc=int(rc), cpu_us=int(cpu1) - int(cpu0))
            w["cpu_per_req"] = w["cpu_us"] / w["requests"] if w["requests"] else None
            w["front_per_req"] = ((int(front1) - int(front0)) / w["requests"]
                                  if w["requests"] and front0 is not None else None)
            w["errs"] = (w["errors"] or 0) + (w["non2xx"] or 0) + (1 if w["rc"] else 0)
            runs.append(w)
    print("Per run (cpu us/req = server tree incl. reaped CGI children [+ php-fpm] / wrk requests)")
    print(f"{'workload':<8} {'rnd':>3} {'server':<15} {'requests':>9} {'rps':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'cpu us/req':>10} {'errors':>6}")
    for w in sorted(runs, key=lambda w: (w["work"], w["round"], w["server"])):
        print(f"{w['work']:<8} {w['round']:>3} {w['server']:<15} {_fmt(w['requests'], 'd'):>9} "
              f"{_fmt(w['rps'], '.0f'):>9} {_fmt(w['p50_ms'], '.2f'):>8} {_fmt(w['p99_ms'], '.2f'):>8} "
              f"{_fmt(w['cpu_per_req'], '.0f'):>10} {w['errs']:>6}")
    print()
    for work in sorted({w["work"] for w in runs}):
        print(f"== {work}, median of rounds ==")
        print(f"{'server':<15} {'req/s':>9} {'p99 ms':>8} {'cpu us/req':>10} {'front us/req':>12} "
              f"{'errors':>6}")
        med = {}
        for server in sorted({w["server"] for w in runs if w["work"] == work}):
            ws = [w for w in runs if w["work"] == work and w["server"] == server]

            def mdn(key):
                vals = [w[key] for w in ws if w[key] is not None]
                return statistics.median(vals) if vals else None

            med[server] = {k: mdn(k) for k in ("rps", "p99_ms", "cpu_per_req", "front_per_req")}
            m = med[server]
            print(f"{server:<15} {_fmt(m['rps'], '.0f'):>9} {_fmt(m['p99_ms'], '.2f'):>8} "
                  f"{_fmt(m['cpu_per_req'], '.0f'):>10} {_fmt(m['front_per_req'], '.1f'):>12} "
                  f"{sum(w['errs'] for w in ws):>6}")
        for gs, peer in PEERS.items():
            if gs in med and peer in med:
                g, p = med[gs], med[peer]
                r = {k: (g[k] / p[k] if g[k] is not None and p[k] else None) for k in g}
                print(f"{gs + '/' + peer:<15} {_fmt(r['rps'], '.2f') + 'x':>9} "
                      f"{_fmt(r['p99_ms'], '.2f') + 'x':>8} {_fmt(r['cpu_per_req'], '.2f') + 'x':>10} "
                      f"{_fmt(r['front_per_req'], '.2f') + 'x':>12}")
        print()
    print("front us/req: the front-end's own CPU (server process tree with reaped CGI children),")
    print("without php-fpm's; cpu us/req counts both.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
