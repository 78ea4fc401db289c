#!/usr/bin/env python3
"""Open N keep-alive connections that each GET one file once, then sit idle; report the
server's RSS growth. One process, non-blocking sockets, selectors (epoll).

usage: idle_client.py --port P --pid PID --path /1k.bin --body-size 1024 [--conns 10000]
       [--label NAME] [--settle 2] [--deadline 50] [--in-flight 256] [--src-ips 1]

RSS is VmRSS of PID and all its descendants (/proc/PID/status), summed. It is read before
the first connection (after a warm-up request) and again once every connection has its
response and has been idle --settle seconds. Everything happens well inside a 75 s
keep-alive timeout: the run aborts if opening all connections takes over --deadline s.
"""

import argparse
import errno
import os
import selectors
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import rss_kib, tree  # noqa: E402


class Conn:
    __slots__ = ("sock", "state", "out", "buf", "need", "src")

    def __init__(self, sock, src):
        self.sock, self.src = sock, src
        self.state = "connecting"
        self.out = b""
        self.buf = bytearray()
        self.need = None  # total bytes of the response once the head is parsed


def parse_head(buf):
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buf[:end]).decode("latin-1").split("\r\n")
    status = head[0].split(" ", 2)
    if len(status) < 2 or status[1] != "200":
        raise RuntimeError(f"unexpected status line {head[0]!r}")
    length = None
    for h in head[1:]:
        k, _, v = h.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
        if k.strip().lower() == "connection" and v.strip().lower() == "close":
            raise RuntimeError("server answered Connection: close")
    if length is None:
        raise RuntimeError("response without Content-Length")
    return end + 4 + length


def still_open(conns):
    """Count connections without a pending EOF/reset/data (poll with zero timeout)."""
    import select
    open_n = closed = 0
    p = select.poll()
    fds = {}
    for c in conns:
        p.register(c.sock.fileno(), select.POLLIN | select.POLLRDHUP if hasattr(select, "POLLRDHUP") else select.POLLIN)
        fds[c.sock.fileno()] = c
    ready = {fd for fd, _ in p.poll(0)}
    for fd in fds:
        if fd in ready:
            closed += 1
        else:
            open_n += 1
    return open_n, closed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--path", default="/1k.bin")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--label", default="server")
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--deadline", type=float, default=50.0)
    ap.add_argument("--in-flight", type=int, default=256)
    ap.add_argument("--src-ips", type=int, default=1,
                    help="spread client sockets over 127.0.0.1..N (more ephemeral ports)")
    a = ap.parse_args()

    req = (f"GET {a.path} HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\n"
           f"User-Agent: gearshift-bench-idle\r\nAccept: */*\r\n\r\n").encode()
    dst = ("127.0.0.1", a.port)

    # Warm-up: one request on a connection we close, so lazy start-up allocations
    # (file cache entry, first-request code paths) land before the baseline.
    for _ in range(3):
        s = socket.create_connection(dst, timeout=5)
        s.sendall(req)
        buf = bytearray()
        need = None
        while need is None or len(buf) < need:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if need is None:
                need = parse_head(buf)
        s.close()
    time.sleep(1.0)

    pids_before = sorted(tree(a.pid))
    rss0 = rss_kib(a.pid)

    sel = selectors.DefaultSelector()
    conns, done = [], []
    pending = 0
    started = 0
    src_n = max(1, a.src_ips)
    errors = {}
    t0 = time.monotonic()

    def open_one(i):
        nonlocal pending, src_n
        for attempt in range(40):
            src = f"127.0.0.{1 + (i + attempt) % src_n}"
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                if src_n > 1:
                    # Port chosen at connect() time, per 4-tuple, not reserved at bind().
                    s.setsockopt(socket.SOL_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
                    s.bind((src, 0))
                err = s.connect_ex(dst)
            except OSError as e:
                err = e.errno
            if err in (0, errno.EINPROGRESS):
                c = Conn(s, src)
                c.out = req
                sel.register(s, selectors.EVENT_WRITE, c)
                conns.append(c)
                pending += 1
                return
            s.close()
            name = errno.errorcode.get(err, str(err))
            errors[name] = errors.get(name, 0) + 1
            if err == errno.EADDRNOTAVAIL and src_n < 32:
                # Ephemeral ports ran short: spread over more source addresses 127.0.0.x.
                src_n = min(32, src_n * 2)
                print(f"{a.label}: ephemeral ports short, using {src_n} source IPs", file=sys.stderr)
            else:
                time.sleep(0.01)
        raise RuntimeError(f"cannot open connection {i}: {errors}")

    failed = 0
    while len(done) + failed < a.conns:
        while started < a.conns and pending < a.in_flight:
            open_one(started)
            started += 1
        if time.monotonic() - t0 > a.deadline:
            print(f"{a.label}: ABORT: only {len(done)} of {a.conns} connections got a response "
                  f"in {a.deadline:.0f} s (errors: {errors})", file=sys.stderr)
            return 1
        for key, ev in sel.select(timeout=1.0):
            c = key.data
            try:
                if c.state == "connecting":
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, os.strerror(err))
                    c.state = "sending"
                if c.state == "sending":
                    n = c.sock.send(c.out)
                    c.out = c.out[n:]
                    if not c.out:
                        c.state = "reading"
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                    continue
                if c.state == "reading":
                    chunk = c.sock.recv(65536)
                    if not chunk:
                        raise OSError(errno.ECONNRESET, "EOF before the full response")
                    c.buf += chunk
                    if c.need is None:
                        c.need = parse_head(c.buf)
                    if c.need is not None and len(c.buf) >= c.need:
                        if len(c.buf) > c.need:
                            raise RuntimeError("more bytes than the response")
                        if c.need - (c.buf.find(b"\r\n\r\n") + 4) != a.body_size:
                            raise RuntimeError("body size differs from the file")
                        c.state = "idle"
                        c.buf = bytearray()
                        sel.unregister(c.sock)
                        done.append(c)
                        pending -= 1
            except (OSError, RuntimeError) as e:
                name = type(e).__name__ + ": " + str(e)
                errors[name] = errors.get(name, 0) + 1
                failed += 1
                pending -= 1
                try:
                    sel.unregister(c.sock)
                except (KeyError, ValueError):
                    pass
                c.sock.close()
                c.state = "failed"
    t_open = time.monotonic() - t0
    if failed:
        print(f"{a.label}: WARNING: {failed} connections failed: {errors}", file=sys.stderr)

    time.sleep(a.settle)
    rss1 = rss_kib(a.pid)
    pids_after = sorted(tree(a.pid))
    open_n, closed = still_open(done)
    t_meas = time.monotonic() - t0

    delta = rss1 - rss0
    n = len(done)
    per_conn = delta * 1024 / n if n else float("nan")
    print(f"{a.label:<10} {n:>6} {open_n:>6} {rss0:>10} {rss1:>10} {delta:>10} "
          f"{delta * 10000 / n / 1024 if n else float('nan'):>12.1f} {per_conn:>10.0f} "
          f"{t_open:>6.1f} {t_meas:>6.1f}")
    if closed:
        print(f"{a.label}: WARNING: {closed} of {n} connections were closed or readable at measurement "
              f"time (the server dropped idle connections?)", file=sys.stderr)
    if pids_before != pids_after:
        print(f"{a.label}: WARNING: server processes changed {pids_before} -> {pids_after} (crash?)",
              file=sys.stderr)
    for c in done:
        c.sock.close()
    return 0 if n == a.conns and not closed else 1


if __name__ == "__main__":
    sys.exit(main())
