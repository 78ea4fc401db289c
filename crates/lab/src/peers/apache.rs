//! apache2 (Debian's package) with a private configuration: one MPM loaded, our port, pid
//! file, runtime directory and error log, no access log, the document root, and the
//! experiment's directives. Run in the foreground (`-DFOREGROUND`) so the lab is its parent
//! and stops it by pid. Debian ships `EnableSendfile Off` (httpd's default); we keep it, and
//! the report says so beside gearshift's sendfile.

use super::ServerDef;
use crate::defaults::apache_debian as deb;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mpm {
    Prefork,
    Worker,
    Event,
}

impl Mpm {
    pub fn name(self) -> &'static str {
        match self {
            Mpm::Prefork => "prefork",
            Mpm::Worker => "worker",
            Mpm::Event => "event",
        }
    }
}

const MODULES: &str = "/usr/lib/apache2/modules";

/// `directives` are MPM and other settings (name, value), written in order after the
/// Debian defaults they override.
pub fn def(
    label: &str,
    mpm: Mpm,
    port: u16,
    docroot: &str,
    directives: &[(&str, String)],
) -> ServerDef {
    let m = mpm.name();
    let mut c = format!(
        "# apache2 configuration written by gearshift lab for {label}\n\
         ServerRoot \"{{dir}}\"\n\
         ServerName localhost\n\
         Listen 127.0.0.1:{port}\n\
         ListenBacklog {backlog}\n\
         PidFile \"{{dir}}/apache2.pid\"\n\
         DefaultRuntimeDir \"{{dir}}\"\n\
         ErrorLog \"{{dir}}/error.log\"\n\
         LogLevel warn\n\
         User www-data\n\
         Group www-data\n\
         LoadModule mpm_{m}_module {MODULES}/mod_mpm_{m}.so\n\
         LoadModule authz_core_module {MODULES}/mod_authz_core.so\n\
         LoadModule mime_module {MODULES}/mod_mime.so\n\
         TypesConfig /etc/mime.types\n\
         DocumentRoot \"{docroot}\"\n\
         <Directory \"{docroot}\">\n    Options None\n    AllowOverride None\n    Require all granted\n</Directory>\n\
         # Debian 12 apache2.conf\n\
         Timeout {timeout}\n\
         KeepAlive On\n\
         MaxKeepAliveRequests {mkr}\n\
         KeepAliveTimeout {kat}\n\
         EnableSendfile Off\n",
        backlog = crate::defaults::common::BACKLOG,
        timeout = deb::TIMEOUT,
        mkr = deb::MAX_KEEPALIVE_REQUESTS,
        kat = deb::KEEPALIVE_TIMEOUT_S,
    );
    c.push_str("# the experiment's settings\n");
    for (k, v) in directives {
        c.push_str(&format!("{k} {v}\n"));
    }
    ServerDef {
        label: label.into(),
        engine: format!("apache2 mpm_{m}"),
        knobs: directives
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        config_name: format!("{label}.conf"),
        config: c,
        files: Vec::new(),
        argv: vec![
            "apache2".into(),
            "-d".into(),
            "{dir}".into(),
            "-f".into(),
            format!("{{dir}}/{label}.conf"),
            "-DFOREGROUND".into(),
        ],
        port,
        admin: None,
        binary: "apache2".into(),
        package: "apache2".into(),
        tool: "apache2".into(),
    }
}

/// mpm_prefork as Debian ships it (paper 003's Apache).
pub fn debian_prefork() -> Vec<(&'static str, String)> {
    deb::PREFORK
        .iter()
        .map(|(k, v)| (*k, v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_the_mpm_and_our_paths() {
        let d = def(
            "apache2-worker",
            Mpm::Worker,
            9000,
            "/srv",
            &[("ThreadsPerChild", "30".into())],
        );
        assert!(d
            .config
            .contains("LoadModule mpm_worker_module /usr/lib/apache2/modules/mod_mpm_worker.so"));
        assert!(d.config.contains("Listen 127.0.0.1:9000"));
        assert!(d.config.contains("ListenBacklog 511"));
        assert!(d.config.ends_with("ThreadsPerChild 30\n"));
        assert_eq!(d.knobs, "ThreadsPerChild=30");
        assert!(d.argv.contains(&"-DFOREGROUND".to_string()));
        assert_eq!(
            debian_prefork()[3],
            ("MaxRequestWorkers", "150".to_string())
        );
    }
}
