#!/usr/bin/env python3
"""Helpers for bench/load (stdlib only): run a load generator and record its own CPU time,
and turn the runs into a wrk vs `gearshift load` table.

Subcommands:
  run RUSAGE_JSON CMD...   run CMD (stdin/stdout/stderr inherited), then write to RUSAGE_JSON
                           {"rc", "wall_s", "utime_us", "stime_us"}: the child's own
                           getrusage (os.wait4), so it counts every thread of the generator
                           and nothing else
  brief DIR GEN ROUND       one line on one run (requests/s, generator CPU us per request)
  report DIR               tables from DIR/runs.tsv, DIR/{wrk,gs}-ROUND.{txt,json} and
                           DIR/rusage-{wrk,gs}-ROUND.json
"""

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import parse_wrk  # noqa: E402


def run(rusage_path, cmd):
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    # wait4 gives the rusage of this child alone (its threads included, other children not).
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    with open(rusage_path, "w") as f:
        json.dump({"rc": rc, "wall_s": wall,
                   "utime_us": int(ru.ru_utime * 1e6), "stime_us": int(ru.ru_stime * 1e6)}, f)
    return rc


def _one(d, gen, rnd):
    """One run: requests, seconds, rps, errors, p99 ms, CPU us of the generator."""
    with open(os.path.join(d, f"rusage-{gen}-{rnd}.json")) as f:
        ru = json.load(f)
    r = {"rc": ru["rc"], "cpu_us": ru["utime_us"] + ru["stime_us"],
         "utime_us": ru["utime_us"], "stime_us": ru["stime_us"]}
    if gen == "wrk":
        with open(os.path.join(d, f"wrk-{rnd}.txt")) as f:
            w = parse_wrk(f.read())
        r.update(requests=w["requests"], seconds=w["seconds"], rps=w["rps"],
                 errors=w["errors"] + w["non2xx"], p99_ms=w["p99_ms"])
    else:
        try:
            with open(os.path.join(d, f"gs-{rnd}.json")) as f:
                j = json.load(f)
        except (OSError, ValueError):
            j = None
        if j is None:
            r.update(requests=None, seconds=None, rps=None, errors=None, p99_ms=None)
        else:
            r.update(requests=j["requests"], seconds=j["elapsed_s"], rps=j["requests_per_s"],
                     errors=j["errors"]["total"], p99_ms=j["latency_us"]["p99"] / 1e3)
    n = r["requests"]
    r["cpu_per_req"] = r["cpu_us"] / n if n else None
    r["cpu_pct"] = 100.0 * r["cpu_us"] / 1e6 / r["seconds"] if r["seconds"] else None
    return r


def _f(v, spec):
    return "-" if v is None else format(v, spec)


def report(d):
    runs = []
    with open(os.path.join(d, "runs.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            gen, rnd = line.split()[:2]
            runs.append((gen, int(rnd), _one(d, gen, rnd)))
    names = {"wrk": "wrk", "gs": "gearshift load"}
    print(f"{'generator':<15} {'round':>5} {'requests':>10} {'req/s':>10} {'p99 ms':>8} "
          f"{'cpu %':>6} {'user us':>9} {'sys us':>9} {'cpu us/req':>10} {'errors':>6}")
    for gen, rnd, r in runs:
        print(f"{names[gen]:<15} {rnd:>5} {_f(r['requests'], 'd'):>10} {_f(r['rps'], '.0f'):>10} "
              f"{_f(r['p99_ms'], '.2f'):>8} {_f(r['cpu_pct'], '.0f'):>6} {r['utime_us']:>9} "
              f"{r['stime_us']:>9} {_f(r['cpu_per_req'], '.3f'):>10} {_f(r['errors'], 'd'):>6}"
              + ("" if r["rc"] == 0 else f"  (exit {r['rc']})"))
    print()
    med = {}
    for gen in ("wrk", "gs"):
        rs = [r for g, _, r in runs if g == gen]
        rps = [r["rps"] for r in rs if r["rps"] is not None]
        cpr = [r["cpu_per_req"] for r in rs if r["cpu_per_req"] is not None]
        med[gen] = (statistics.median(rps) if rps else None,
                    statistics.median(cpr) if cpr else None)
        print(f"median {names[gen]:<15} {_f(med[gen][0], '.0f'):>10} req/s "
              f"{_f(med[gen][1], '.3f'):>8} cpu us/req  ({len(rs)} runs)")
    (wr, wc), (gr, gc) = med["wrk"], med["gs"]
    if None in (wr, wc, gr, gc):
        print("verdict: incomplete (a generator produced no result)")
        return 1
    print(f"gearshift load / wrk: req/s {gr / wr:.3f}, cpu us/req {gc / wc:.3f} (ratio of medians)")
    # Paired by round: both generators ran back to back, so a round's ratio is less moved by
    # the slow drift of other load on the machine than the medians are.
    by_round = {}
    for gen, rnd, r in runs:
        by_round.setdefault(rnd, {})[gen] = r
    pr, pc = [], []
    for pair in by_round.values():
        w, g = pair.get("wrk"), pair.get("gs")
        if w and g and w["rps"] and g["rps"]:
            pr.append(g["rps"] / w["rps"])
        if w and g and w["cpu_per_req"] and g["cpu_per_req"]:
            pc.append(g["cpu_per_req"] / w["cpu_per_req"])
    if pr and pc:
        print(f"gearshift load / wrk, median of per-round ratios: req/s "
              f"{statistics.median(pr):.3f}, cpu us/req {statistics.median(pc):.3f} "
              f"(cpu us/req ratio per round: {' '.join(f'{x:.2f}' for x in pc)})")
    rps_ok, cpu_ok = gr >= wr * 0.99, gc <= wc * 1.01
    print(f"target (1% tolerance, on the medians): req/s >= wrk's: {'met' if rps_ok else 'NOT met'}; "
          f"cpu us/req <= wrk's: {'met' if cpu_ok else 'NOT met'}")
    busiest = max((r["cpu_pct"] or 0) for _, _, r in runs)
    if busiest < 80:
        # As bench/static's "srv cpu%": a generator well below a full CPU was not what
        # limited the run, so its req/s tell how fast nginx (on a shared machine) answered.
        print(f"note: no generator used more than {busiest:.0f}% of a CPU: nginx (or other load on "
              f"the machine) limited every run, so req/s compare the server's luck more than the "
              f"generators; cpu us/req is the figure to trust")
    errs = sum((r["errors"] or 0) for _, _, r in runs)
    if errs:
        print(f"warning: {errs} errors over all runs (see the raw outputs)")
    return 0


def brief(d, gen, rnd):
    r = _one(d, gen, rnd)
    print(f"{_f(r['rps'], '.0f')} req/s, generator cpu {r['cpu_us'] / 1000:.0f} ms "
          f"({_f(r['cpu_pct'], '.0f')} %), {_f(r['cpu_per_req'], '.3f')} us/req")
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "brief":
        return brief(argv[2], argv[3], argv[4])
    if len(argv) >= 4 and argv[1] == "run":
        return run(argv[2], argv[3:])
    if len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
