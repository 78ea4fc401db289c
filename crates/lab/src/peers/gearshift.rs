//! gearshift's engines as the lab starts them: `gearshift serve --config FILE`, the file
//! written here with every setting the experiment chose (Apache's knob names for `prefork`
//! and `worker`, docs/gearshift.toml has them all), the access log off as for every peer.

use super::ServerDef;

/// `top` holds top-level keys (`workers = 1`), `tables` TOML tables (`[worker]` ...).
pub fn def(
    label: &str,
    engine: &str,
    exe: &str,
    port: u16,
    admin: Option<u16>,
    docroot: &str,
    top: &str,
    tables: &str,
) -> ServerDef {
    let admin_s = admin.map(|p| format!("127.0.0.1:{p}")).unwrap_or_default();
    let config = format!(
        "# gearshift configuration written by gearshift lab for {label}\n\
         root = \"{docroot}\"\n\
         listen = \"127.0.0.1:{port}\"\n\
         engine = \"{engine}\"\n\
         admin = \"{admin_s}\"\n\
         {top}\n\
         [log]\n\
         access = \"off\"\n\
         level = \"warn\"\n\n\
         {tables}\n"
    );
    ServerDef {
        label: label.into(),
        engine: format!("gearshift {engine}"),
        knobs: knobs(top, tables),
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
pub fn knobs(top: &str, tables: &str) -> String {
    let mut out = Vec::new();
    let mut table = String::new();
    for line in top.lines().chain(tables.lines()) {
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
        let d = def(
            "gs-worker",
            "worker",
            "/bin/gearshift",
            8081,
            None,
            "/srv",
            "workers = 0",
            "[worker]\nthreads_per_child = 30\nmax_request_workers = 150\n",
        );
        assert!(d.config.contains("engine = \"worker\""));
        assert!(d.config.contains("listen = \"127.0.0.1:8081\""));
        assert!(d.config.contains("[worker]\nthreads_per_child = 30"));
        assert_eq!(
            d.knobs,
            "workers=0 worker.threads_per_child=30 worker.max_request_workers=150"
        );
        assert_eq!(d.argv.last().unwrap(), "{dir}/gs-worker.toml");
    }
}
