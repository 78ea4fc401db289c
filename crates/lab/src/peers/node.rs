//! Paper 003's Node.js server: one process, the `http` module, the file read with `fs` on
//! every request (the paper's script is unknown; this is the plainest one), backlog 511.
//! The script is written beside its run and saved in the report.

use super::ServerDef;

pub const SCRIPT: &str = r#"// Paper 003's Node.js server, written by gearshift lab: one process, http + fs.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');
const [root, host, port] = process.argv.slice(2);
const base = path.resolve(root);
const server = http.createServer((req, res) => {
  let p;
  try {
    p = path.join(base, decodeURIComponent(req.url.split('?')[0]));
  } catch (e) {
    res.writeHead(400);
    res.end();
    return;
  }
  if (!p.startsWith(base + path.sep)) {
    res.writeHead(403);
    res.end();
    return;
  }
  fs.readFile(p, (err, data) => {
    if (err) {
      res.writeHead(404, { 'Content-Length': 0 });
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html', 'Content-Length': data.length });
    res.end(data);
  });
});
server.listen({ host, port: Number(port), backlog: 511 });
"#;

pub fn def(label: &str, port: u16, docroot: &str) -> ServerDef {
    ServerDef {
        label: label.into(),
        engine: "node http (one process)".into(),
        knobs: "processes=1 backlog=511".into(),
        config_name: format!("{label}.js"),
        config: SCRIPT.into(),
        files: Vec::new(),
        argv: vec![
            "node".into(),
            format!("{{dir}}/{label}.js"),
            docroot.into(),
            "127.0.0.1".into(),
            port.to_string(),
        ],
        port,
        admin: None,
        binary: "node".into(),
        package: "nodejs".into(),
        tool: "node".into(),
    }
}
