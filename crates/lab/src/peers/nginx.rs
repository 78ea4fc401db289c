//! nginx (Debian's package) with a private configuration: one worker (the papers' "one
//! process"), `worker_connections` as chosen (Debian ships 768), sendfile as Debian ships,
//! no access log, listen backlog 511, our prefix, pid file and error log. Run with
//! `daemon off` so the lab is its master's parent.

use super::ServerDef;

pub fn def(
    label: &str,
    port: u16,
    docroot: &str,
    worker_connections: u64,
    http_extra: &str,
) -> ServerDef {
    let config = format!(
        "# nginx configuration written by gearshift lab for {label}\n\
         user www-data;\n\
         worker_processes 1;\n\
         worker_rlimit_nofile 20000;\n\
         pid {{dir}}/nginx.pid;\n\
         error_log {{dir}}/error.log warn;\n\
         daemon off;\n\
         events {{\n    worker_connections {worker_connections};\n}}\n\
         http {{\n\
         \x20   include /etc/nginx/mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   sendfile on;\n\
         \x20   tcp_nopush on;\n\
         \x20   access_log off;\n\
         \x20   client_body_temp_path {{dir}}/body;\n\
         \x20   proxy_temp_path {{dir}}/proxy;\n\
         \x20   fastcgi_temp_path {{dir}}/fastcgi;\n\
         \x20   uwsgi_temp_path {{dir}}/uwsgi;\n\
         \x20   scgi_temp_path {{dir}}/scgi;\n\
         {http_extra}\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port} backlog={backlog};\n\
         \x20       root {docroot};\n\
         \x20   }}\n\
         }}\n",
        backlog = crate::defaults::common::BACKLOG
    );
    ServerDef {
        label: label.into(),
        engine: "nginx".into(),
        knobs: format!(
            "worker_processes=1 worker_connections={worker_connections}{}",
            if http_extra.is_empty() {
                ""
            } else {
                " +http_extra"
            }
        ),
        config_name: format!("{label}.conf"),
        config,
        files: Vec::new(),
        argv: vec![
            "nginx".into(),
            "-p".into(),
            "{dir}".into(),
            "-e".into(),
            "{dir}/error.log".into(),
            "-c".into(),
            format!("{{dir}}/{label}.conf"),
        ],
        port,
        admin: None,
        binary: "nginx".into(),
        package: "nginx".into(),
        tool: "nginx".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_and_our_port() {
        let d = def(
            "nginx",
            9001,
            "/srv",
            768,
            "    open_file_cache max=10000;\n",
        );
        assert!(d.config.contains("worker_processes 1;"));
        assert!(d.config.contains("worker_connections 768;"));
        assert!(d.config.contains("listen 127.0.0.1:9001 backlog=511;"));
        assert!(d.config.contains("    open_file_cache max=10000;\n"));
        assert_eq!(d.config.matches('{').count(), d.config.matches('}').count());
    }
}
