//! gearshift's engines as the lab starts them: `gearshift serve --config FILE`, the file
//! written here with every setting the experiment chose (Apache's knob names for `prefork`
//! and `worker`, docs/gearshift.toml has them all), the access log off as for every peer.

use super::ServerDef;

/// `extra` holds top-level keys first (`workers = 1`), then TOML tables (`[worker]` ...).
pub fn def(
    label: &str,
    engine: &str,
    exe: &str,
    port: u16,
    admin: Option<u16>,
    docroot: &str,
    extra: &str,
) -> ServerDef {
    let admin_s = admin.map(|p| format!("127.0.0.1:{p}")).unwrap_or_default();
    let config = format!(
        "# gearshift configuration written by gearshift lab for {label}\n\
         root = \"{docroot}\"\n\
         listen = \"127.0.0.1:{port}\"\n\
         engine = \"{engine}\"\n\
         admin = \"{admin_s}\"\n\
         {extra}\n\n\
         [log]\n\
         access = \"off\"\n\
         level = \"warn\"\n"
    );
    ServerDef {
        label: label.into(),
        engine: format!("gearshift {engine}"),
        knobs: knobs(extra),
        config_name: format!("{label}.toml"),
        config,
        files: Vec::new(),
        argv: vec![
            exe.into(),
            "serve".into(),
            "--config".into(),
            format!("{{dir}}/{label}.toml"),
        ],
        port,
        admin,
        binary: exe.into(),
        package: "gearshift".into(),
        tool: "gearshift".into(),
    }
}

/// The `key = value` settings of a TOML snippet in one line, tables as prefixes.
pub fn knobs(extra: &str) -> String {
    let mut out = Vec::new();
    let mut table = String::new();
    for line in extra.lines() {
        let l = line.split('#').next().unwrap_or("").trim();
        if let Some(t) = l.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            table = format!("{t}.");
        } else if let Some((k, v)) = l.split_once('=') {
            out.push(format!(
                "{table}{}={}",
                k.trim(),
                v.trim().trim_matches('"')
            ));
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_knobs() {
        let extra = "workers = 0\n[worker]\nthreads_per_child = 30\nmax_request_workers = 150\n";
        let d = def(
            "gs-worker",
            "worker",
            "/bin/gearshift",
            8081,
            None,
            "/srv",
            extra,
        );
        assert!(d.config.contains("engine = \"worker\""));
        assert!(d.config.contains("listen = \"127.0.0.1:8081\""));
        assert!(d.config.contains("[worker]\nthreads_per_child = 30"));
        // Top-level keys come before the first table, [log] after the experiment's tables.
        assert!(d.config.find("workers = 0").unwrap() < d.config.find("[worker]").unwrap());
        assert!(d.config.trim_end().ends_with("level = \"warn\""));
        assert_eq!(
            d.knobs,
            "workers=0 worker.threads_per_child=30 worker.max_request_workers=150"
        );
        assert_eq!(d.argv.last().unwrap(), "{dir}/gs-worker.toml");
    }
}
