//! lighttpd (Debian's package), paper 002's stand-in for Zeus (a single-process event loop):
//! one process, our port, pid file and error log, listen backlog 511, file descriptors and
//! connections raised for paper 002's 1000 keep-alive connections. Run in the foreground
//! (`-D`); its error log goes to stderr (the run directory's stderr.log), since lighttpd opens
//! its log after dropping to www-data, who cannot write the lab's root-owned directory.

use super::ServerDef;

pub fn def(label: &str, port: u16, docroot: &str, max_connections: u64) -> ServerDef {
    let config = format!(
        "# lighttpd configuration written by gearshift lab for {label}\n\
         server.document-root = \"{docroot}\"\n\
         server.bind = \"127.0.0.1\"\n\
         server.port = {port}\n\
         server.pid-file = \"{{dir}}/lighttpd.pid\"\n\
         server.username = \"www-data\"\n\
         server.groupname = \"www-data\"\n\
         server.max-fds = {fds}\n\
         server.max-connections = {max_connections}\n\
         server.listen-backlog = {backlog}\n\
         server.event-handler = \"linux-sysepoll\"\n\
         mimetype.assign = (\".html\" => \"text/html\", \"\" => \"application/octet-stream\")\n",
        fds = (max_connections * 2).max(1024),
        backlog = crate::defaults::common::BACKLOG
    );
    ServerDef {
        label: label.into(),
        engine: "lighttpd".into(),
        knobs: format!("processes=1 max-connections={max_connections}"),
        config_name: format!("{label}.conf"),
        config,
        files: Vec::new(),
        argv: vec![
            "lighttpd".into(),
            "-D".into(),
            "-f".into(),
            format!("{{dir}}/{label}.conf"),
        ],
        port,
        admin: None,
        binary: "lighttpd".into(),
        package: "lighttpd".into(),
        tool: "lighttpd".into(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn settings() {
        let d = super::def("lighttpd", 9002, "/srv", 2000);
        assert!(d.config.contains("server.port = 9002"));
        assert!(d.config.contains("server.max-fds = 4000"));
        assert!(d.config.contains("server.listen-backlog = 511"));
    }
}
