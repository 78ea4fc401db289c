//! `gearshift ctl`: the command-line client of the admin interface. `status` prints the
//! running server's `/status`; `set KNOB=VALUE ...` changes knobs live (all-or-nothing);
//! `knobs` lists them with their bounds; `freeze` and `unfreeze` stop and restart the online
//! controller; `metrics` prints the Prometheus text; `history` the last minutes of samples;
//! `fit` regresses keta's c1, c2 on a trajectory log or that history (see fit.rs). It
//! speaks plain HTTP/1.1 over TCP or a Unix socket, with the `Host` the admin listener
//! checks (the address it reached), `Content-Type: application/json` and the bearer token
//! (`--token`, `GEARSHIFT_ADMIN_TOKEN`) if the server wants one.

use clap::{Args, Subcommand};
use std::io::{Read, Write};
use std::time::Duration;

#[derive(Args)]
pub struct CtlArgs {
    /// Admin address of the server: IP:PORT or a Unix socket path.
    #[arg(long, env = "GEARSHIFT_ADMIN", default_value = "127.0.0.1:8081")]
    admin: String,
    /// Bearer token of the admin listener (its `admin_token`), if it has one.
    #[arg(long, env = "GEARSHIFT_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Engine, knobs, workers and counters as JSON.
    Status,
    /// Knob definitions (bounds) and values.
    Knobs,
    /// Change knobs: `gearshift ctl set threads=8 queue=100`.
    Set {
        #[arg(required = true, value_parser = parse_assignment)]
        changes: Vec<(String, u64)>,
    },
    /// Stop the online controller from changing knobs (it keeps sampling).
    Freeze,
    /// Let the online controller change knobs again.
    Unfreeze,
    /// Metrics in Prometheus text format.
    Metrics,
    /// The last minutes of samples (sensors, knobs, frozen) as JSON.
    History,
    /// Fit keta's c1, c2 of U = c1 W + c2 R from recorded intervals: a trajectory log
    /// (`--from`), or else the server's `/history`.
    Fit {
        /// A JSON-lines trajectory log (`[control] trajectory`) instead of the live history.
        #[arg(long, value_name = "TRAJECTORY.jsonl")]
        from: Option<std::path::PathBuf>,
        /// What U is: `pipeline` (busy share of all stage threads), `cpu`, a stage name
        /// (`process`, `send` ...), or `auto` (pipeline if the samples have stages, else cpu).
        #[arg(long, default_value = "auto")]
        utilisation: crate::fit::Utilisation,
    },
}

fn parse_assignment(s: &str) -> Result<(String, u64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not KNOB=VALUE"))?;
    let v = v
        .parse()
        .map_err(|_| format!("{k}: '{v}' is not a non-negative integer"))?;
    Ok((k.to_string(), v))
}

pub fn run(args: CtlArgs) -> Result<(), String> {
    let admin = Admin {
        addr: &args.admin,
        token: args.token.as_deref(),
    };
    let (method, path, body) = match &args.command {
        CtlCommand::Status => ("GET", "/status", String::new()),
        CtlCommand::Knobs => ("GET", "/knobs", String::new()),
        CtlCommand::Freeze => ("PUT", "/control", r#"{"frozen": true}"#.to_string()),
        CtlCommand::Unfreeze => ("PUT", "/control", r#"{"frozen": false}"#.to_string()),
        CtlCommand::Metrics => ("GET", "/metrics", String::new()),
        CtlCommand::History => ("GET", "/history", String::new()),
        CtlCommand::Fit { from, utilisation } => return fit(&admin, from.as_deref(), utilisation),
        CtlCommand::Set { changes } => {
            let obj: serde_json::Map<String, serde_json::Value> = changes
                .iter()
                .map(|(k, v)| (k.clone(), (*v).into()))
                .collect();
            ("PUT", "/knobs", serde_json::Value::Object(obj).to_string())
        }
    };
    let body = request(&admin, method, path, &body)?;
    print!("{body}");
    Ok(())
}

/// `ctl fit`: from a trajectory log, or else the running server's `/history`.
fn fit(
    admin: &Admin,
    from: Option<&std::path::Path>,
    utilisation: &crate::fit::Utilisation,
) -> Result<(), String> {
    let records = match from {
        Some(path) => crate::fit::read_trajectory(path)?,
        None => {
            let text = request(admin, "GET", "/history", "")?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("admin: /history is not JSON: {e}"))?;
            crate::fit::history_samples(&v)?
        }
    };
    let (samples, idle, label) = crate::fit::samples(&records, utilisation)?;
    let fit = crate::fit::fit(&samples, idle, label)?;
    print!("{}", crate::fit::report(&fit));
    Ok(())
}

/// Where the admin listener is, and its token.
struct Admin<'a> {
    addr: &'a str,
    token: Option<&'a str>,
}

/// One admin request: the body of a 200, or the server's error message.
fn request(admin: &Admin, method: &str, path: &str, body: &str) -> Result<String, String> {
    let auth = admin
        .token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    // `Host` is filled in once connected: the address reached (what the listener checks).
    let request = |host: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let addr = admin.addr;
    let response = exchange(addr, request).map_err(|e| format!("admin {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("admin: malformed response")?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status == "200" {
        Ok(body.to_string())
    } else {
        print!("{body}");
        let msg = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
            .unwrap_or_else(|| format!("status {status}"));
        Err(msg)
    }
}

fn exchange(addr: &str, request: impl Fn(&str) -> String) -> std::io::Result<Vec<u8>> {
    let timeout = Some(Duration::from_secs(5));
    let mut out = Vec::new();
    if addr.contains('/') {
        let mut s = std::os::unix::net::UnixStream::connect(addr)?;
        s.set_read_timeout(timeout)?;
        s.write_all(request("localhost").as_bytes())?;
        s.read_to_end(&mut out)?;
    } else {
        let sa: std::net::SocketAddr = addr
            .parse()
            .map_err(|_| std::io::Error::other("not IP:PORT or a socket path"))?;
        let mut s = std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(5))?;
        s.set_read_timeout(timeout)?;
        // The address reached (`0.0.0.0:P` reaches `127.0.0.1:P`).
        let host = s.peer_addr()?.to_string();
        s.write_all(request(&host).as_bytes())?;
        s.read_to_end(&mut out)?;
    }
    Ok(out)
}
