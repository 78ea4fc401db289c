//! The `gearshift` command: one binary, subcommands per job: `serve` runs the server,
//! `ctl` talks to its admin listener, `load` generates load, `sim` simulates, `lab` reruns
//! the papers, `cluster` runs nodes behind a balancer. This is the one place where
//! command-line arguments become library options; configuration precedence is command
//! line > environment (clap's `env`) > TOML file > built-in defaults.

mod ctl;
mod fit;
mod worker_args;

use clap::{Args, Parser, Subcommand};
use gearshift_runtime::config::Config;
use gearshift_runtime::config::LogFormat;
use gearshift_runtime::errlog::Sink;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "gearshift",
    version,
    about = "An HTTP/1.1 server whose concurrency architecture is a choice"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a directory over HTTP/1.1 (default: the current directory on 127.0.0.1:8080).
    Serve(Box<ServeArgs>),
    /// Talk to a running server's admin interface: status, knobs.
    Ctl(ctl::CtlArgs),
    /// Simulate paper 001's server and paper 002's pipeline; run controllers against them.
    Sim(gearshift_control::cli::SimArgs),
    /// Generate HTTP(S) load against a server on this machine, or any with --allow-remote
    /// (closed loop, open loop, WAGON sessions), or write a SPECweb99-like file set
    /// (`load fileset DIR`).
    Load(Box<gearshift_load::LoadArgs>),
    /// Rerun the papers' experiments against gearshift's engines and the real servers they
    /// measured, and write a report (`lab 000|001|002|003|004|all [--quick]`); `lab cluster`
    /// runs issue 16's scale-out experiment in the same report format.
    Lab(gearshift_lab::LabArgs),
    /// N nodes in network namespaces behind HAProxy or gearshift's proxy: up, status,
    /// metrics, reload (rolling), down, bench.
    Cluster(gearshift_cluster::ClusterArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Directory to serve.
    #[arg(env = "GEARSHIFT_ROOT")]
    dir: Option<PathBuf>,
    /// Address to listen on, IP:PORT (port 0 picks a free port; IPv6 in brackets,
    /// `[::1]:8080`); several separated by commas.
    #[arg(long, env = "GEARSHIFT_LISTEN")]
    listen: Option<String>,
    /// Concurrency architecture.
    #[arg(long, env = "GEARSHIFT_ENGINE")]
    engine: Option<String>,
    /// Workers (event loops); 0 = one per core.
    #[arg(long, env = "GEARSHIFT_WORKERS")]
    workers: Option<usize>,
    /// TOML configuration file.
    #[arg(long, env = "GEARSHIFT_CONFIG")]
    config: Option<PathBuf>,
    /// Validate the configuration and exit.
    #[arg(long)]
    check_config: bool,
    /// Access log: off, stdout or a file path.
    #[arg(long, env = "GEARSHIFT_ACCESS_LOG")]
    access_log: Option<String>,
    /// Access log format.
    #[arg(long, env = "GEARSHIFT_LOG_FORMAT", value_parser = parse_format)]
    log_format: Option<LogFormat>,
    /// List directories that have no index file (the default without --config).
    #[arg(long, conflicts_with = "no_listing")]
    listing: bool,
    /// Do not list directories (the default with --config, as nginx's autoindex).
    #[arg(long)]
    no_listing: bool,
    /// Serve dotfiles.
    #[arg(long)]
    hidden: bool,
    /// Cache-Control header value for files.
    #[arg(long, env = "GEARSHIFT_CACHE_CONTROL")]
    cache_control: Option<String>,
    /// Disable the in-memory object cache.
    #[arg(long)]
    no_cache: bool,
    /// Compress text files on the fly (gzip, brotli) for clients that accept it
    /// (`[compression] enabled`; off by default, as nginx's gzip).
    #[arg(long)]
    compress: bool,
    /// Admin interface (status and live knobs): IP:PORT or a Unix socket path.
    #[arg(long, env = "GEARSHIFT_ADMIN")]
    admin: Option<String>,
    /// Run as this user (name or uid) once listening (start as root to bind port 80).
    #[arg(long, env = "GEARSHIFT_USER")]
    user: Option<String>,
    /// ... and this group (default: the user's primary group).
    #[arg(long, env = "GEARSHIFT_GROUP")]
    group: Option<String>,
    /// Write the server's pid to this file once listening.
    #[arg(long, env = "GEARSHIFT_PID_FILE")]
    pid_file: Option<PathBuf>,
    /// Diagnostics: stderr or a file path.
    #[arg(long, env = "GEARSHIFT_ERROR_LOG")]
    error_log: Option<String>,
    #[command(flatten)]
    staged: StagedArgs,
    #[command(flatten)]
    worker: worker_args::WorkerArgs,
    #[command(flatten)]
    control: ControlArgs,
}

/// The online controller (the `[control]` TOML table; `gearshift ctl freeze` stops it).
#[derive(Args, Clone, Default)]
struct ControlArgs {
    /// Controller tuning the engine's knobs while it serves: static, apache, newton, fuzzy,
    /// saturation, keta or gearshift.
    #[arg(long, env = "GEARSHIFT_CONTROLLER")]
    controller: Option<String>,
    /// Sampling interval of the sensors and the controller, ms.
    #[arg(long, env = "GEARSHIFT_CONTROL_INTERVAL_MS")]
    control_interval_ms: Option<u64>,
    /// JSON-lines trajectory log, one line per sampling interval.
    #[arg(long, env = "GEARSHIFT_CONTROL_TRAJECTORY")]
    control_trajectory: Option<PathBuf>,
}

impl ControlArgs {
    fn apply(&self, c: &mut gearshift_runtime::live::LiveConfig) {
        if let Some(v) = &self.controller {
            c.controller = v.clone();
        }
        if let Some(v) = self.control_interval_ms {
            c.interval_ms = v;
        }
        if let Some(v) = &self.control_trajectory {
            c.trajectory = v.clone();
        }
    }
}

/// Knobs of the `staged` engine (the `[staged]` TOML table; live: `gearshift ctl set`).
#[derive(Args, Clone, Default)]
struct StagedArgs {
    /// staged: accept stage threads.
    #[arg(long)]
    staged_accept_threads: Option<usize>,
    /// staged: receive (read and parse) stage threads.
    #[arg(long)]
    staged_receive_threads: Option<usize>,
    /// staged: process (handler) stage threads (`--workers`, when given, sets this).
    #[arg(long)]
    staged_process_threads: Option<usize>,
    /// staged: send stage threads.
    #[arg(long)]
    staged_send_threads: Option<usize>,
    /// staged: total thread budget M of the four stages.
    #[arg(long)]
    staged_max_threads: Option<usize>,
    /// staged: bound of each inter-stage queue.
    #[arg(long)]
    staged_queue: Option<usize>,
}

impl StagedArgs {
    fn apply(&self, c: &mut gearshift_runtime::config::StagedConfig) {
        let pairs = [
            (self.staged_accept_threads, &mut c.accept_threads),
            (self.staged_receive_threads, &mut c.receive_threads),
            (self.staged_process_threads, &mut c.process_threads),
            (self.staged_send_threads, &mut c.send_threads),
            (self.staged_max_threads, &mut c.max_threads),
            (self.staged_queue, &mut c.queue),
        ];
        for (arg, field) in pairs {
            if let Some(v) = arg {
                *field = v;
            }
        }
    }
}

fn parse_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "common" => Ok(LogFormat::Common),
        "combined" => Ok(LogFormat::Combined),
        "vhost_combined" => Ok(LogFormat::VhostCombined),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!(
            "'{s}' is not one of common, combined, vhost_combined, json"
        )),
    }
}

/// File (if any), then environment/command-line overrides.
fn load_config(a: &ServeArgs) -> Result<Config, String> {
    let mut c = match &a.config {
        Some(path) => Config::from_file(path)?,
        None => {
            // Zero-config serving lists directories, as `python3 -m http.server` does; a
            // configuration file's default stays off (nginx autoindex).
            let mut c = Config::default();
            c.static_files.listing = true;
            c
        }
    };
    if let Some(d) = &a.dir {
        c.root = d.clone();
    }
    if let Some(v) = &a.listen {
        let addrs = v.split(',').map(str::trim).filter(|s| !s.is_empty());
        c.listen = gearshift_runtime::config::Listen(addrs.map(String::from).collect());
    }
    if let Some(v) = &a.engine {
        c.engine = v.clone();
    }
    if let Some(v) = a.workers {
        c.workers = v;
    }
    if let Some(v) = &a.access_log {
        c.log.access = v.clone();
    }
    if let Some(v) = a.log_format {
        c.log.format = v;
    }
    if let Some(v) = &a.admin {
        c.admin = v.clone();
    }
    if let Some(v) = &a.user {
        c.user = v.clone();
    }
    if let Some(v) = &a.group {
        c.group = v.clone();
    }
    if let Some(v) = &a.pid_file {
        c.pid_file = v.clone();
    }
    if let Some(v) = &a.error_log {
        c.log.error = v.clone();
    }
    if let Some(v) = &a.cache_control {
        c.static_files.cache_control = v.clone();
    }
    a.staged.apply(&mut c.staged);
    a.worker.apply(&mut c.worker);
    a.control.apply(&mut c.control);
    c.static_files.listing = (c.static_files.listing || a.listing) && !a.no_listing;
    c.static_files.hidden |= a.hidden;
    if a.no_cache {
        c.cache.enabled = false;
    }
    c.compression.enabled |= a.compress;
    // Absolute root, so the banner and reloads do not depend on the working directory.
    if let Ok(abs) = std::fs::canonicalize(&c.root) {
        c.root = abs;
    }
    Ok(c)
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let config = load_config(&args)?;
    if args.check_config {
        for note in gearshift_runtime::check(&config)? {
            println!("note: {note}");
        }
        println!("configuration ok");
        return Ok(());
    }
    init_tracing(
        &config.log.level,
        gearshift_runtime::errlog::open(&config.log.error)?,
    );
    let root = config.root.clone();
    let listing = if config.static_files.listing {
        ", listing directories"
    } else {
        ""
    };
    let reload_args = args.clone();
    gearshift_runtime::serve(config, Box::new(move || load_config(&reload_args)), |s| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let admin = s
            .admin
            .as_ref()
            .map(|a| format!("; admin {a}"))
            .unwrap_or_default();
        // Every listener, HTTP first: `on http://A/ and http://B/ and https://C/`.
        let _ = writeln!(
            out,
            "gearshift: serving {} on {} (engine {}, {} workers{listing}{admin})",
            root.display(),
            s.urls().join(" and "),
            s.engine,
            s.workers
        );
        let _ = out.flush();
    })
}

/// Diagnostics to stderr, or to the error log file (`log.error`), one line per event.
fn init_tracing(level: &str, file: Option<Arc<Sink>>) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GEARSHIFT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = match file {
        None => builder
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        Some(sink) => builder
            .with_writer(move || SinkWriter(sink.clone()))
            .with_ansi(false)
            .try_init(),
    };
}

/// One formatted event at a time into the error log's sink (a single O_APPEND write).
struct SinkWriter(Arc<Sink>);

impl std::io::Write for SinkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf).map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Load(args) => gearshift_load::main(*args),
        Command::Ctl(args) => ctl::run(args),
        Command::Sim(args) => gearshift_control::cli::run_sim(args),
        Command::Lab(args) => gearshift_lab::main(args),
        Command::Cluster(args) => gearshift_cluster::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gearshift: {e}");
            ExitCode::FAILURE
        }
    }
}
