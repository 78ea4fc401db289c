#!/usr/bin/env python3
"""CGI twin of gearshift's synthetic work endpoint (crates/server/src/dynamic/work.rs), so
paper 001's CGI workload can be rerun: QUERY_STRING cpu_us=&sleep_ms=&bytes=&alloc_kb=
burns CPU (measured in process CPU time), sleeps, allocates and touches memory, then prints
a body of `bytes` bytes. Same bounds as the endpoint's defaults; anything out of range or
malformed is a 400 naming the parameter. Install: copy into a CGI directory, chmod +x."""

import os
import sys
import time

MAX = {"cpu_us": 1_000_000, "sleep_ms": 10_000, "bytes": 64 * 1024 * 1024, "alloc_kb": 64 * 1024}


def fail(msg):
    body = (msg + "\n").encode()
    sys.stdout.buffer.write(b"Status: 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n")
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.exit(0)


def parse(query):
    want = dict.fromkeys(MAX, 0)
    for pair in filter(None, query.split("&")):
        name, _, value = pair.partition("=")
        if name not in MAX:
            fail(f"unknown parameter '{name}' (known: cpu_us, sleep_ms, bytes, alloc_kb)")
        if not value.isascii() or not value.isdigit():
            fail(f"{name}: '{value}' is not a whole number")
        v = int(value)
        if v > MAX[name]:
            fail(f"{name}: {v} is above the maximum {MAX[name]}")
        want[name] = v
    return want


def main():
    w = parse(os.environ.get("QUERY_STRING", ""))
    held = bytearray(w["alloc_kb"] * 1024)
    for i in range(0, len(held), 4096):
        held[i] = 1
    end = time.process_time() + w["cpu_us"] / 1e6
    x = 0x9E3779B9
    while w["cpu_us"] and time.process_time() < end:
        for _ in range(1000):
            x = (x * 0x2545F491 + 7) & 0xFFFFFFFF
    time.sleep(w["sleep_ms"] / 1000)
    del held
    out = sys.stdout.buffer
    out.write(b"Content-Type: text/plain\r\nCache-Control: no-store\r\n")
    out.write(b"Content-Length: %d\r\n\r\n" % w["bytes"])
    block = b"x" * 16384
    left = w["bytes"]
    while left > 0:
        n = min(left, len(block))
        out.write(block[:n])
        left -= n
    out.flush()


main()
