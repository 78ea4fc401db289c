#!/usr/bin/env python3
"""Helpers of bench/attacks (issue 17), all on loopback and bounded in time:

  probe HOST PORT PATH SECONDS EVERY   GET PATH on a fresh connection every EVERY s for
                                       SECONDS; a probe counts as answered only if a whole
                                       200 arrived within 1 s of its connect. Prints
                                       "OK TOTAL".
  flood HOST PORT N RATE SECONDS       open N connections at RATE/s that never send a
                                       byte, hold them for SECONDS, close them.
  crawl HOST PORT PREFIX N SIZE        GET PREFIX0.bin .. PREFIX{N-1}.bin once each
                                       (SIZE bytes each); prints "FAILED N".
"""

import socket
import sys
import time

LIMIT = 1.0


def get(host, port, path, limit, want=None):
    """True if a complete 200 (Content-Length body, or `want` bytes) arrived within limit."""
    start = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout=limit)
    except OSError:
        return False
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n".encode())
        got = b""
        while True:
            left = limit - (time.monotonic() - start)
            if left <= 0:
                return False
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            end = got.find(b"\r\n\r\n")
            if end >= 0:
                head = got[:end].decode("latin-1").lower()
                length = None
                for line in head.split("\r\n"):
                    if line.startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if length is not None and len(got) >= end + 4 + length:
                    break
        return got.startswith(b"HTTP/1.1 200") and (want is None or len(got) >= want)
    except OSError:
        return False
    finally:
        s.close()


def probe(host, port, path, seconds, every):
    ok = total = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        total += 1
        ok += get(host, port, path, LIMIT)
        rest = every - (time.monotonic() - t0)
        if rest > 0:
            time.sleep(rest)
    print(ok, total)


def flood(host, port, n, rate, seconds):
    held = []
    end = time.monotonic() + seconds
    gap = 1.0 / max(rate, 1)
    while len(held) < n and time.monotonic() < end:
        try:
            held.append(socket.create_connection((host, port), timeout=0.5))
        except OSError:
            pass
        time.sleep(gap)
    while time.monotonic() < end:
        time.sleep(0.1)
    for s in held:
        s.close()


def crawl(host, port, prefix, n, size):
    failed = sum(not get(host, port, f"{prefix}{i}.bin", 10.0, size) for i in range(n))
    print("FAILED", failed)


def main():
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    a = sys.argv[4:]
    if mode == "probe":
        probe(host, port, a[0], float(a[1]), float(a[2]))
    elif mode == "flood":
        flood(host, port, int(a[0]), float(a[1]), float(a[2]))
    elif mode == "crawl":
        crawl(host, port, a[0], int(a[1]), int(a[2]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
