//! Paper 004's hand-written servers, stood in for by Python's `socketserver`: a process per
//! connection (`ForkingTCPServer`) or a thread per connection (`ThreadingTCPServer`),
//! answering each GET with the file and the paper's 66-byte head (status line,
//! Content-Type, Content-Length), then closing. Listen backlog 511; `max_children` as
//! gs-fork's. The GIL caps the threaded one at one core.

use super::ServerDef;

/// Debian's interpreter (the package the lab installs), not a user's pyenv shim.
pub const PYTHON: &str = "/usr/bin/python3";

pub const SCRIPT: &str = r#"# Paper 004's forked / threaded server, written by gearshift lab.
import os, socketserver, sys

mode, host, port, root, max_children = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline(8192)
        while True:
            h = self.rfile.readline(8192)
            if not h or h in (b"\r\n", b"\n"):
                break
        parts = line.split()
        if len(parts) < 2:
            return
        path = os.path.normpath(os.path.join(root, parts[1].decode("latin-1").split("?")[0].lstrip("/")))
        try:
            if not path.startswith(root):
                raise OSError("outside the root")
            with open(path, "rb") as f:
                body = f.read()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body)
        except OSError:
            body = b""
            head = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        self.wfile.write(head + body)

base = socketserver.ForkingTCPServer if mode == "fork" else socketserver.ThreadingTCPServer

class Server(base):
    allow_reuse_address = True
    request_queue_size = 511
    daemon_threads = True
    block_on_close = False

if mode == "fork":
    Server.max_children = max_children

Server((host, port), Handler).serve_forever()
"#;

/// `mode` is "fork" or "thread".
pub fn def(label: &str, mode: &str, port: u16, docroot: &str, max_children: u64) -> ServerDef {
    let engine = if mode == "fork" {
        "python3 ForkingTCPServer"
    } else {
        "python3 ThreadingTCPServer"
    };
    ServerDef {
        label: label.into(),
        engine: engine.into(),
        knobs: format!("request_queue_size=511 max_children={max_children}"),
        config_name: format!("{label}.py"),
        config: SCRIPT.into(),
        files: Vec::new(),
        argv: vec![
            PYTHON.into(),
            format!("{{dir}}/{label}.py"),
            mode.into(),
            "127.0.0.1".into(),
            port.to_string(),
            docroot.into(),
            max_children.to_string(),
        ],
        port,
        admin: None,
        binary: PYTHON.into(),
        package: "python3".into(),
        tool: "python3".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn head_is_the_papers_66_bytes() {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(head.len(), 66);
        assert!(super::SCRIPT
            .contains(r"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"));
        let d = super::def("py-fork", "fork", 9003, "/srv", 64);
        assert_eq!(d.argv[2], "fork");
        assert_eq!(d.argv.last().unwrap(), "64");
    }
}
