#!/usr/bin/env python3
"""Helpers of bench/control (issue 7): reduce the static MaxClients sweep and the controller
runs to a table, and write the trajectories as CSV and JSON.

Inputs (in the results dir): `gearshift load --json` outputs (`*-load.json`, whose `series`
has one entry per second of the run with count, mean and p50/p90/p99/max of request latency),
`sweep-schedule.tsv` (MaxClients, seconds since the load started, load average), the
server's trajectory logs (`*-trajectory.jsonl`, one JSON line per control interval) and
`ctl-NAME-meta.json` (when the controller was unfrozen, in seconds since the load started).

Latency over a window: the mean is exact (per-second means weighted by counts); p50 and p99
are read off the pooled distribution of the per-second ones, each approximated piecewise
linearly through (0, 0), p50, p90, p99 and max, which is close enough to rank settings.

  controlbench.py sweep OUT SEG SETTLE
  controlbench.py brief OUT CONTROLLER BAND
  controlbench.py report OUT START_MC BAND CONTROLLER...
"""

import csv
import json
import math
import os
import statistics
import sys

KNOB = "max_request_workers"


def load_series(path):
    with open(path) as f:
        j = json.load(f)
    return j, j.get("series") or []


def window(series, lo, hi):
    """Per-second entries with lo <= second and second + 1 <= hi."""
    return [s for s in series if s["second"] >= lo - 1e-9 and s["second"] + 1 <= hi + 1e-9]


def pooled(secs):
    """count, mean, p50, p99 (ms), errors, req/s of a list of per-second entries."""
    n = sum(s["requests"] for s in secs)
    errs = sum(s["errors"] for s in secs)
    if n == 0:
        return {"count": 0, "mean_ms": None, "p50_ms": None, "p99_ms": None,
                "errors": errs, "rps": 0.0}
    mean = sum(s.get("mean_us", 0.0) * s["requests"] for s in secs) / n
    pts = []
    for s in secs:
        if s["requests"]:
            xs = [0.0, s["p50_us"], s["p90_us"], s["p99_us"], s["max_us"]]
            for i in range(1, len(xs)):
                xs[i] = max(xs[i], xs[i - 1])
            pts.append((s["requests"], xs))
    qs = [0.0, 0.5, 0.9, 0.99, 1.0]

    def cdf(x):
        tot = 0.0
        for w, xs in pts:
            if x >= xs[-1]:
                tot += w
                continue
            for i in range(1, len(xs)):
                if x < xs[i]:
                    span = xs[i] - xs[i - 1]
                    f = qs[i - 1] + (qs[i] - qs[i - 1]) * ((x - xs[i - 1]) / span if span else 1)
                    tot += w * f
                    break
        return tot / n

    def quant(q):
        lo, hi = 0.0, max(xs[-1] for _, xs in pts)
        for _ in range(60):
            mid = (lo + hi) / 2
            if cdf(mid) < q:
                lo = mid
            else:
                hi = mid
        return hi

    return {"count": n, "mean_ms": mean / 1e3, "p50_ms": quant(0.5) / 1e3,
            "p99_ms": quant(0.99) / 1e3, "errors": errs, "rps": n / max(1, len(secs))}


def fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def sweep(out, seg, settle):
    _, series = load_series(os.path.join(out, "sweep-load.json"))
    rows = []
    with open(os.path.join(out, "sweep-schedule.tsv")) as f:
        for line in f:
            mc, t, la = line.split()
            t = float(t)
            st = pooled(window(series, math.ceil(t + settle), t + seg))
            st.update({"max_clients": int(mc), "loadavg": float(la)})
            rows.append(st)
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["max_clients", "mean_ms", "p50_ms", "p99_ms", "requests_per_s", "errors", "loadavg"])
        for r in rows:
            w.writerow([r["max_clients"], r["mean_ms"], r["p50_ms"], r["p99_ms"], r["rps"],
                        r["errors"], r["loadavg"]])
    print("static MaxClients sweep (client request latency after the settle time)")
    print(f"{'MaxClients':>10} {'mean ms':>9} {'p50 ms':>9} {'p99 ms':>9} {'req/s':>7} {'errors':>6} {'loadavg':>7}")
    for r in rows:
        print(f"{r['max_clients']:>10} {fmt(r['mean_ms'], 2):>9} {fmt(r['p50_ms'], 2):>9} "
              f"{fmt(r['p99_ms'], 1):>9} {r['rps']:>7.0f} {r['errors']:>6} {r['loadavg']:>7.2f}")
    best = best_static(rows)
    if best:
        print(f"best static: MaxClients {best['max_clients']}, mean {best['mean_ms']:.2f} ms")


def best_static(rows):
    ok = [r for r in rows if r["mean_ms"] is not None]
    return min(ok, key=lambda r: r["mean_ms"]) if ok else None


def trajectory(out, name):
    lines = []
    with open(os.path.join(out, f"ctl-{name}-trajectory.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                lines.append(json.loads(line))
    return lines


def analyse(out, name, band):
    """The controller run of `name`: its trajectory since the unfreeze, convergence and RT."""
    with open(os.path.join(out, f"ctl-{name}-meta.json")) as f:
        meta = json.load(f)
    j, series = load_series(os.path.join(out, f"ctl-{name}-load.json"))
    traj = trajectory(out, name)
    # The unfreeze: the first unfrozen line after a frozen one (a line may be logged before
    # the script's freeze reached the server).
    t_u = next((traj[i]["t_s"] for i in range(1, len(traj))
                if traj[i - 1].get("frozen") and not traj[i].get("frozen")), None)
    if t_u is None:
        t_u = next((p["t_s"] for p in traj if not p.get("frozen")), None)
    if t_u is None:
        return None
    # The first unfrozen line closes the interval in which the unfreeze happened.
    t_u -= 0.5 * (traj[1]["t_s"] - traj[0]["t_s"] if len(traj) > 1 else 1.0)
    u = meta["unfreeze_s"]
    dur = (j.get("config") or {}).get("duration_s") or (series[-1]["second"] + 1 if series else 0)
    run = max(1.0, dur - u)
    pts = []
    by_sec = {s["second"]: s for s in series}
    for p in traj:
        t = p["t_s"] - t_u
        if t < -5 or t > run + 1:
            continue
        sec = by_sec.get(int(math.floor(t + u)))
        pts.append({
            "t_s": round(t, 3),
            "max_clients": p["knobs"].get(KNOB),
            "frozen": p.get("frozen"),
            "client_mean_ms": (sec.get("mean_us", 0) / 1e3 if sec and sec["requests"] else None),
            "client_p99_ms": (sec["p99_us"] / 1e3 if sec and sec["requests"] else None),
            "client_rps": sec["requests"] if sec else 0,
            "server_rt_ms": p.get("rt_s", 0) * 1e3,
            "queue_wait_ms": p.get("queue_wait_s", 0) * 1e3,
            "accept_queue_len": p.get("accept_queue_len"),
            "service_ms": p.get("service_time_s", 0) * 1e3,
            "cpu": p.get("cpu"),
            "busy": p.get("busy"),
            "idle": p.get("idle"),
        })
    live = [p for p in pts if p["t_s"] >= 0 and p["max_clients"] is not None]
    res = {"controller": name, "loadavg_start": meta.get("loadavg_start"), "points": pts}
    if not live:
        return res
    tail = [p["max_clients"] for p in live if p["t_s"] >= 0.75 * run]
    final = statistics.median(tail or [live[-1]["max_clients"]])
    lim = max(band * final, 1.0)
    # Convergence: the first time after which every sample stays within the band.
    conv = None
    for i, p in enumerate(live):
        if all(abs(q["max_clients"] - final) <= lim for q in live[i:]):
            conv = p["t_s"]
            break
    steady = pooled(window(series, math.ceil(u + run / 2), u + run))
    warm = pooled(window(series, math.ceil(u / 2), u))
    res.update({"final_max_clients": final, "convergence_s": conv, "steady": steady,
                "frozen_at_start": warm, "run_s": run})
    with open(os.path.join(out, f"ctl-{name}-trajectory.csv"), "w", newline="") as f:
        keys = list(pts[0].keys())
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(pts)
    return res


def brief(out, name, band):
    r = analyse(out, name, band)
    if not r or "steady" not in r:
        print("no trajectory")
        return
    s = r["steady"]
    print(f"final MaxClients {r['final_max_clients']:.0f}, converged at {fmt(r['convergence_s'])} s, "
          f"steady mean {fmt(s['mean_ms'], 2)} ms p99 {fmt(s['p99_ms'], 1)} ms, errors {s['errors']}")


def key_points(r, n=8):
    """A few (t, MaxClients, client mean ms) points of a trajectory: start, every change of
    more than 10 %, the end."""
    live = [p for p in r["points"] if p["t_s"] >= 0 and p["max_clients"] is not None]
    if not live:
        return ""
    keep = [live[0]]
    for p in live[1:]:
        if abs(p["max_clients"] - keep[-1]["max_clients"]) > 0.1 * keep[-1]["max_clients"]:
            keep.append(p)
    if keep[-1] is not live[-1]:
        keep.append(live[-1])
    if len(keep) > n:
        keep = keep[: n - 2] + [keep[-2], keep[-1]]
    return " ".join(f"{p['t_s']:.0f}s:{p['max_clients']}({fmt(p['client_mean_ms'], 1)}ms)" for p in keep)


def report(out, start_mc, band, names):
    rows = []
    sp = os.path.join(out, "sweep.json")
    sweep_rows = json.load(open(sp)) if os.path.exists(sp) else []
    best = best_static(sweep_rows)
    default = next((r for r in sweep_rows if r["max_clients"] == start_mc), None)
    results = []
    for name in names:
        try:
            r = analyse(out, name, band)
        except (OSError, ValueError, KeyError, IndexError) as e:
            print(f"{name}: no result ({e})")
            continue
        if r and "steady" in r:
            results.append(r)
    print(f"controllers from MaxClients {start_mc}; steady = last half of each run; "
          f"convergence band +-{band * 100:.0f} % of the final value")
    if best:
        print(f"best static: MaxClients {best['max_clients']}, mean {best['mean_ms']:.2f} ms "
              f"(p99 {fmt(best['p99_ms'])} ms)")
    if default:
        print(f"Apache default (static MaxClients {start_mc}): mean {fmt(default['mean_ms'], 2)} ms "
              f"(p99 {fmt(default['p99_ms'])} ms, errors {default['errors']})")
    hdr = (f"{'controller':<11} {'final MC':>8} {'steady ms':>9} {'p99 ms':>8} {'vs best':>7} "
           f"{'conv s':>6} {'default/ctl':>11} {'errors':>6} {'loadavg':>7}")
    print(hdr)
    for r in results:
        s = r["steady"]
        m = s["mean_ms"]
        vs = m / best["mean_ms"] if (best and m) else None
        dflt = default["mean_ms"] / m if (default and default["mean_ms"] and m) else None
        rows.append({"controller": r["controller"], "final_max_clients": r["final_max_clients"],
                     "steady_mean_ms": m, "steady_p99_ms": s["p99_ms"], "ratio_vs_best_static": vs,
                     "convergence_s": r["convergence_s"], "ratio_default_over_controller": dflt,
                     "errors": s["errors"], "frozen_start_mean_ms": r["frozen_at_start"]["mean_ms"],
                     "loadavg_start": r["loadavg_start"]})
        print(f"{r['controller']:<11} {r['final_max_clients']:>8.0f} {fmt(m, 2):>9} {fmt(s['p99_ms']):>8} "
              f"{fmt(vs, 2):>7} {fmt(r['convergence_s'], 0):>6} {fmt(dflt, 1):>11} {s['errors']:>6} "
              f"{fmt(r['loadavg_start'], 2):>7}")
    print()
    print("trajectories (t since unfreeze: MaxClients (client mean RT of that second)):")
    for r in results:
        print(f"  {r['controller']:<11} {key_points(r)}")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"best_static": best, "default_static": default, "controllers": rows,
                   "trajectories": {r["controller"]: r["points"] for r in results}}, f, indent=1)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    cmd, out = argv[1], argv[2]
    if cmd == "sweep":
        sweep(out, float(argv[3]), float(argv[4]))
    elif cmd == "brief":
        brief(out, argv[3], float(argv[4]))
    elif cmd == "report":
        report(out, int(argv[3]), float(argv[4]), argv[5:])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
