//! The `gearshift` command: one binary, subcommands per job. `serve` runs the server; later
//! issues add `load`, `ctl`, `sim` and `lab`. Configuration precedence is
//! command line > environment (clap's `env`) > TOML file > built-in defaults.

mod ctl;
mod fit;
mod worker_args;

use clap::{Args, Parser, Subcommand};
use gearshift_runtime::config::Config;
use gearshift_runtime::config::LogFormat;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// N nodes in network namespaces behind HAProxy or gearshift's proxy: up, status,
    /// metrics, reload (rolling), down, bench.
    Cluster(gearshift_cluster::ClusterArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// Directory to serve.
    #[arg(env = "GEARSHIFT_ROOT")]
    dir: Option<PathBuf>,
    /// Address to listen on, IP:PORT (port 0 picks a free port).
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
    /// List directories that have no index file.
    #[arg(long)]
    listing: bool,
    /// Serve dotfiles.
    #[arg(long)]
    hidden: bool,
    /// Cache-Control header value for files.
    #[arg(long, env = "GEARSHIFT_CACHE_CONTROL")]
    cache_control: Option<String>,
    /// Disable the in-memory object cache.
    #[arg(long)]
    no_cache: bool,
    /// Admin interface (status and live knobs): IP:PORT or a Unix socket path.
    #[arg(long, env = "GEARSHIFT_ADMIN")]
    admin: Option<String>,
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
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("'{s}' is not one of common, combined, json")),
    }
}

/// File (if any), then environment/command-line overrides.
fn load_config(a: &ServeArgs) -> Result<Config, String> {
    let mut c = match &a.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(d) = &a.dir {
        c.root = d.clone();
    }
    if let Some(v) = &a.listen {
        c.listen = v.clone();
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
    if let Some(v) = &a.cache_control {
        c.static_files.cache_control = v.clone();
    }
    a.staged.apply(&mut c.staged);
    a.worker.apply(&mut c.worker);
    a.control.apply(&mut c.control);
    c.static_files.listing |= a.listing;
    c.static_files.hidden |= a.hidden;
    if a.no_cache {
        c.cache.enabled = false;
    }
    // Absolute root, so the banner and reloads do not depend on the working directory.
    if let Ok(abs) = std::fs::canonicalize(&c.root) {
        c.root = abs;
    }
    Ok(c)
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let config = load_config(&args)?;
    if args.check_config {
        config.validate()?;
        gearshift_runtime::bind(config.listen_addr()?).map(drop)?;
        println!("configuration ok");
        return Ok(());
    }
    init_tracing(&config.log.level);
    let root = config.root.clone();
    let reload_args = args.clone();
    gearshift_runtime::serve(config, Box::new(move || load_config(&reload_args)), |s| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let admin = s
            .admin
            .as_ref()
            .map(|a| format!("; admin {a}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "gearshift: serving {} on http://{}/ (engine {}, {} workers{admin})",
            root.display(),
            s.addr,
            s.engine,
            s.workers
        );
        let _ = out.flush();
    })
}

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GEARSHIFT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Load(args) => gearshift_load::main(*args),
        Command::Ctl(args) => ctl::run(args),
        Command::Sim(args) => gearshift_control::cli::run_sim(args),
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
