# A multiplexing FastCGI backend (stdlib only), for crates/gearshift/tests/dynamic_fastcgi_mux.rs
# and bench/fastcgi-mux. Usage: mux_backend.py PORT STATS_FILE MAX_CONNS MAX_REQS MPXS(0|1)
# Answers FCGI_GET_VALUES with FCGI_MPXS_CONNS=MPXS and the given FCGI_MAX_CONNS and
# FCGI_MAX_REQS, keeps connections open, serves the requests of one connection concurrently
# (a thread each; STDOUT records of different requests interleave, content padded to 8
# bytes) and rewrites STATS_FILE ("conns=.. maxconc=.. aborts=.. requests=.. dupids=..
# probes=..") on every change. Scripts, by SCRIPT_NAME (query: ms= delay, n= tag, mb= size):
#   /big.x   mb MiB of bytes 0..255 repeated; /hold.x  1 KiB every 20 ms until aborted (30 s);
#   /cantmpx.x  END_REQUEST with FCGI_CANT_MPX_CONN;
#   anything else: "TAG LENGTH CRC32" of the request body after ms milliseconds.
import os, socket, struct, sys, threading, time, zlib
port, stats_path, max_conns, max_reqs, mpxs = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(64)
lock = threading.Lock()
stats = {"conns": 0, "maxconc": 0, "aborts": 0, "requests": 0, "dupids": 0, "probes": 0}
def save():
    tmp = stats_path + ".tmp"
    with open(tmp, "w") as f: f.write(" ".join("%s=%d" % kv for kv in stats.items()))
    os.replace(tmp, stats_path)
save()
def rec(t, rid, body=b""):
    pad = (-len(body)) % 8
    return struct.pack(">BBHHBB", 1, t, rid, len(body), pad, 0) + body + b"\0" * pad
def pair(k, v): return bytes([len(k), len(v)]) + k + v
def pairs(b):
    out, i = {}, 0
    def ln():
        nonlocal i
        if b[i] < 128: i += 1; return b[i-1]
        v = struct.unpack(">I", b[i:i+4])[0] & 0x7fffffff; i += 4; return v
    while i < len(b):
        n = ln(); v = ln(); out[b[i:i+n]] = b[i+n:i+n+v]; i += n + v
    return out
def read_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d: raise EOFError
        b += d
    return b
BLOCK = bytes(range(256)) * 128
class Req:
    def __init__(self): self.params = b""; self.n = 0; self.crc = 0; self.aborted = threading.Event()
class Conn:
    def __init__(self, c): self.c = c; self.w = threading.Lock(); self.reqs = {}; self.counted = False
    def send(self, data):
        with self.w: self.c.sendall(data)
    def out(self, rid, data):
        for i in range(0, len(data), 32768): self.send(rec(6, rid, data[i:i+32768]))
    def end(self, rid):
        # Out of the table before END_REQUEST goes: the client may reuse the id at once.
        with lock: self.reqs.pop(rid, None)
        try: self.send(rec(6, rid) + rec(3, rid, b"\0" * 8))
        except OSError: pass
    def handle(self, rid, r):
        try:
            p = pairs(r.params)
            name = p.get(b"SCRIPT_NAME", b"").decode()
            q = dict(kv.split("=", 1) for kv in p.get(b"QUERY_STRING", b"").decode().split("&") if "=" in kv)
            ms = int(q.get("ms", "0"))
            if ms: r.aborted.wait(ms / 1000.0)
            head = b"Content-Type: text/plain\r\n\r\n"
            if name == "/big.x":
                self.out(rid, b"Content-Type: application/octet-stream\r\n\r\n")
                for _ in range(int(q.get("mb", "1")) * 32):
                    if r.aborted.is_set(): break
                    self.send(rec(6, rid, BLOCK))
            elif name == "/cantmpx.x":
                with lock: self.reqs.pop(rid, None)
                self.send(rec(3, rid, b"\0\0\0\0\x01\0\0\0")); return
            elif name == "/hold.x":
                self.out(rid, head)
                deadline = time.time() + 30
                while not r.aborted.is_set() and time.time() < deadline:
                    self.send(rec(6, rid, b"x" * 1024)); time.sleep(0.02)
            else:
                self.out(rid, head + ("%s %d %08x" % (q.get("n", name), r.n, r.crc & 0xffffffff)).encode())
        except OSError:
            return
        self.end(rid)
    def serve(self):
        try:
            while True:
                v, t, rid, n, p, _ = struct.unpack(">BBHHBB", read_exact(self.c, 8))
                body = read_exact(self.c, n + p)[:n]
                if t == 9:
                    with lock: stats["probes"] += 1; save()
                    ans = pair(b"FCGI_MPXS_CONNS", mpxs.encode()) + pair(b"FCGI_MAX_CONNS", max_conns.encode()) + pair(b"FCGI_MAX_REQS", max_reqs.encode())
                    self.send(rec(10, 0, ans)); continue
                with lock:
                    if t == 1:
                        if rid in self.reqs: stats["dupids"] += 1
                        self.reqs[rid] = Req()
                        stats["requests"] += 1
                        if not self.counted: self.counted = True; stats["conns"] += 1
                        stats["maxconc"] = max(stats["maxconc"], len(self.reqs))
                        save(); continue
                    r = self.reqs.get(rid)
                    if t == 2:
                        stats["aborts"] += 1; save()
                        sys.stderr.write("abort %d\n" % rid)
                        if r: r.aborted.set()
                        continue
                if r is None: continue
                if t == 4: r.params += body
                elif t == 5 and n > 0: r.n += n; r.crc = zlib.crc32(body, r.crc)
                elif t == 5: threading.Thread(target=self.handle, args=(rid, r), daemon=True).start()
        except (EOFError, OSError):
            pass
        for r in list(self.reqs.values()): r.aborted.set()
        self.c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=Conn(c).serve, daemon=True).start()
