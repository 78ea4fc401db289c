//! Configuration: one TOML file holding every option, overridden by environment variables,
//! overridden by the command line (the CLI crate does that merge). Validation produces one
//! clear line naming the problem, so `--check-config` and a bad start fail the same way.
//!
//! The file is flat (`[http]`, `[static]`, `[prefork]`, `[cgi]`, `[proxy]`...), and each
//! section is typed and validated by the crate that owns it: the HTTP and log sections by
//! the core, the handlers' sections by the handlers, the engines' by the engines, `[control]`
//! by the online-control loop here. `Config` only holds them and hands each layer its part
//! (`service`, `engines`).

pub use gearshift_core::accesslog::LogFormat;
pub use gearshift_core::config::{HttpConfig, LogConfig};
use gearshift_core::defaults;
pub use gearshift_core::net::Listen;
pub use gearshift_core::tls::{CertificateConfig, TlsConfig};
pub use gearshift_engines::config::{
    DynamicConfig, EngineConfig, ForkConfig, PoolConfig, PreforkConfig, StagedConfig,
    ThreadsConfig, WorkerConfig,
};
pub use gearshift_handlers::cgi::CgiConfig;
pub use gearshift_handlers::fastcgi::FastCgiConfig;
pub use gearshift_handlers::files::compress::CompressionConfig;
pub use gearshift_handlers::files::config::{CacheConfig, StaticConfig};
pub use gearshift_handlers::proxy::ProxyConfig;
pub use gearshift_handlers::sites::{SiteConfig, UnknownHost};
pub use gearshift_handlers::work::WorkConfig;
use gearshift_handlers::ServiceConfig;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Most listeners (`listen` and `tls.listen` together).
pub const MAX_LISTENERS: usize = 255;

/// The whole configuration. Unknown keys are errors (`deny_unknown_fields`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Document root.
    pub root: PathBuf,
    /// Listening address `IP:PORT` (port 0 picks a free one; IPv6 in brackets), or an
    /// array of them.
    pub listen: Listen,
    /// Concurrency architecture; see `engine::NAMES`.
    pub engine: String,
    /// Event loops (or processes) of the engine; 0 = one per core.
    pub workers: usize,
    /// Drain time on SIGTERM/SIGINT, ms.
    pub shutdown_timeout_ms: u64,
    /// Admin interface: `IP:PORT` or a Unix socket path; empty = off.
    pub admin: String,
    /// Names the admin listener answers to in `Host`, besides its address (and `localhost`
    /// on loopback): say, the name a reverse proxy in front of it uses.
    pub admin_hosts: Vec<String>,
    /// Bearer token every admin request must carry (`Authorization: Bearer TOKEN`); "" =
    /// none. Required (here or in `admin_token_file`) when `admin` is not a loopback address.
    pub admin_token: String,
    /// A file whose first line is that token (kept out of the configuration file).
    pub admin_token_file: PathBuf,
    /// File mode of a Unix-socket admin listener.
    pub admin_socket_mode: u32,
    /// Drop privileges to this user (name or uid) once listening; empty = stay as started.
    pub user: String,
    /// ... and this group (name or gid); empty = the user's primary group.
    pub group: String,
    /// Write the server's pid here once listening; empty = no pid file.
    pub pid_file: PathBuf,
    pub http: HttpConfig,
    #[serde(rename = "static")]
    pub static_files: StaticConfig,
    pub cache: CacheConfig,
    /// On-the-fly gzip and brotli of static files.
    pub compression: CompressionConfig,
    pub log: LogConfig,
    /// Knobs of the `threads` engine.
    pub threads: ThreadsConfig,
    /// Knobs of the `pool` engine.
    pub pool: PoolConfig,
    /// Knobs of the `fork` engine.
    pub fork: ForkConfig,
    /// Knobs of the `prefork` engine (Apache mpm_prefork's names).
    pub prefork: PreforkConfig,
    /// Knobs of the `worker` engine (Apache mpm_worker's names).
    pub worker: WorkerConfig,
    /// Knobs of the `staged` engine (paper 002).
    pub staged: StagedConfig,
    /// The event engine's pool for dynamic exchanges.
    pub dynamic: DynamicConfig,
    /// CGI/1.1 scripts.
    pub cgi: CgiConfig,
    /// FastCGI application server (php-fpm).
    pub fastcgi: FastCgiConfig,
    /// The synthetic work endpoint.
    pub work: WorkConfig,
    /// Sensors, online controller and trajectory log (issue 7).
    pub control: crate::live::LiveConfig,
    /// The reverse proxy (`[[proxy.route]]`, `[[proxy.upstream]]`).
    pub proxy: ProxyConfig,
    /// A request for a host no `[[site]]` names: `default` (the default site answers, as
    /// nginx's default server) or `421` (Misdirected Request).
    pub unknown_host: UnknownHost,
    /// Virtual hosts (`[[site]]`), chosen by the request's Host; the configuration outside
    /// them is the site answering other hosts.
    #[serde(rename = "site", skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteConfig>,
    /// HTTPS on listeners of its own (`[tls]`, `[[tls.certificate]]`).
    pub tls: TlsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("."),
            listen: Listen::one(defaults::LISTEN),
            engine: "event".to_string(),
            workers: 0,
            shutdown_timeout_ms: defaults::SHUTDOWN_TIMEOUT_MS,
            admin: String::new(),
            admin_hosts: Vec::new(),
            admin_token: String::new(),
            admin_token_file: PathBuf::new(),
            admin_socket_mode: defaults::ADMIN_SOCKET_MODE,
            user: String::new(),
            group: String::new(),
            pid_file: PathBuf::new(),
            http: HttpConfig::default(),
            static_files: StaticConfig::default(),
            cache: CacheConfig::default(),
            compression: CompressionConfig::default(),
            log: LogConfig::default(),
            threads: ThreadsConfig::default(),
            pool: PoolConfig::default(),
            fork: ForkConfig::default(),
            prefork: PreforkConfig::default(),
            worker: WorkerConfig::default(),
            staged: StagedConfig::default(),
            dynamic: DynamicConfig::default(),
            cgi: CgiConfig::default(),
            fastcgi: FastCgiConfig::default(),
            work: WorkConfig::default(),
            control: crate::live::LiveConfig::default(),
            proxy: ProxyConfig::default(),
            unknown_host: UnknownHost::Default,
            sites: Vec::new(),
            tls: TlsConfig::default(),
        }
    }
}

impl Config {
    /// Parse a TOML file. Errors are one line: `FILE: line L, column C: message`.
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e: toml::de::Error| {
            let msg = e.message().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    let line = text[..span.start].matches('\n').count() + 1;
                    // Quote the offending line so the message names the key.
                    let src = text.lines().nth(line - 1).unwrap_or("").trim();
                    format!("line {line} ({src}): {msg}")
                }
                None => msg,
            }
        })
    }

    /// Check every value; the error is one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        self.listeners()?;
        self.admin_access()?;
        crate::ops::identity(&self.user, &self.group)?;
        if let Some(dir) = self
            .pid_file
            .parent()
            .filter(|_| !self.pid_file.as_os_str().is_empty())
        {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if !dir.is_dir() {
                return Err(format!("pid_file: {}: no such directory", dir.display()));
            }
        }
        self.control.validate()?;
        self.engines().validate()?;
        match std::fs::metadata(&self.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("root: {} is not a directory", self.root.display())),
            Err(e) => return Err(format!("root: {}: {e}", self.root.display())),
        }
        self.http.validate()?;
        self.static_files.validate()?;
        self.cache.validate()?;
        self.compression.validate()?;
        self.log.validate()?;
        self.fastcgi.validate()?;
        self.cgi.validate()?;
        self.work.validate()?;
        self.proxy.validate()?;
        gearshift_handlers::sites::validate(&self.sites, &self.static_files)?;
        self.tls.validate(&self.site_certificates())?;
        let all: Vec<SocketAddr> = self.listeners()?.into_iter().map(|(a, _)| a).collect();
        for site in &self.sites {
            for a in site.listen.addrs("listen")? {
                if !all.contains(&a) {
                    return Err(format!(
                        "site {}: listen: {a} is none of the server's listen or tls.listen addresses",
                        site.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The addresses to listen on, in the order engines number them: `listen`, then
    /// `tls.listen` (HTTPS: true). Errors name the option; an address in both is refused.
    pub fn listeners(&self) -> Result<Vec<(SocketAddr, bool)>, String> {
        let plain = self.listen_addrs()?;
        let https = match self.tls.enabled() {
            true => self.tls.listen_addrs()?,
            false => Vec::new(),
        };
        if let Some(a) = https.iter().find(|a| a.port() != 0 && plain.contains(a)) {
            return Err(format!(
                "tls.listen: {a} is in listen too (HTTP and HTTPS need listeners of their own)"
            ));
        }
        // Requests carry their listener's number in a byte (`RequestHead::listener`).
        if plain.len() + https.len() > MAX_LISTENERS {
            return Err(format!(
                "listen: at most {MAX_LISTENERS} addresses with tls.listen's"
            ));
        }
        let tagged = |v: Vec<SocketAddr>, tls: bool| v.into_iter().map(move |a| (a, tls));
        Ok(tagged(plain, false).chain(tagged(https, true)).collect())
    }

    /// The sites' certificates (`tls_cert`, `tls_key`) as `[[tls.certificate]]`s for their
    /// names, each with the name its errors give it.
    pub fn site_certificates(&self) -> Vec<(String, CertificateConfig)> {
        self.sites
            .iter()
            .filter_map(SiteConfig::certificate)
            .collect()
    }

    /// The admin listener's access rules (the token read from its file); errors name the
    /// option. A listener beyond loopback without a token is refused.
    pub fn admin_access(&self) -> Result<crate::admin::Access, String> {
        crate::admin::Access::from_config(
            &self.admin,
            &self.admin_hosts,
            &self.admin_token,
            &self.admin_token_file,
            self.admin_socket_mode,
        )
    }

    /// The plain HTTP listeners' addresses (at least one).
    pub fn listen_addrs(&self) -> Result<Vec<SocketAddr>, String> {
        let addrs = self.listen.addrs("listen")?;
        if addrs.is_empty() {
            return Err("listen: at least one address (IP:PORT) is needed".into());
        }
        Ok(addrs)
    }

    /// The sections the handlers' `Service` is built from, for a server whose listeners
    /// are `listeners` (in the engines' order: what `[[site]] listen` is matched against).
    pub fn service_on<'a>(&'a self, listeners: &'a [SocketAddr]) -> ServiceConfig<'a> {
        ServiceConfig {
            listeners,
            ..self.service()
        }
    }

    /// The sections the handlers' `Service` is built from (sites restricted to listeners
    /// are matched by `service_on`).
    pub fn service(&self) -> ServiceConfig<'_> {
        ServiceConfig {
            root: &self.root,
            http: &self.http,
            log: &self.log,
            static_files: &self.static_files,
            cache: &self.cache,
            compression: &self.compression,
            cgi: &self.cgi,
            fastcgi: &self.fastcgi,
            work: &self.work,
            proxy: &self.proxy,
            sites: &self.sites,
            unknown_host: self.unknown_host,
            listeners: &[],
        }
    }

    /// The sections the engine is built from.
    pub fn engines(&self) -> EngineConfig {
        EngineConfig {
            engine: self.engine.clone(),
            workers: self.workers,
            threads: self.threads.clone(),
            pool: self.pool.clone(),
            fork: self.fork.clone(),
            prefork: self.prefork.clone(),
            worker: self.worker.clone(),
            staged: self.staged.clone(),
            dynamic: self.dynamic.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        let e = Config::from_toml("root = \".\"\n[http]\nmax_heda = 5\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("max_heda"), "{e}");
    }

    #[test]
    fn bad_value_is_one_line() {
        let e = Config::from_toml("workers = \"many\"\n").unwrap_err();
        assert!(
            e.starts_with("line 1 (workers = \"many\"):") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn validate_names_the_option() {
        let mut c = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        assert_eq!(c.validate(), Ok(()));
        c.listen = Listen::one("localhost");
        assert!(c.validate().unwrap_err().starts_with("listen:"));
        c.listen = Listen::one("127.0.0.1:0");
        c.engine = "warp".into();
        assert!(c.validate().unwrap_err().starts_with("engine:"));
        c.engine = "event".into();
        c.root = "/definitely/not/here".into();
        assert!(c.validate().unwrap_err().starts_with("root:"));
        c.root = std::env::temp_dir();
        c.http.max_head = 0;
        assert!(c.validate().unwrap_err().starts_with("http.max_head"));
        c.http.max_head = Config::default().http.max_head;
        c.staged.max_threads = 8; // the default stages run 9
        assert!(c.validate().unwrap_err().starts_with("staged.max_threads"));
    }

    #[test]
    fn documented_example_lists_the_defaults() {
        let text = include_str!("../../../docs/gearshift.toml");
        assert_eq!(Config::from_toml(text).unwrap(), Config::default());
        let documented = text.lines().filter(|l| l.contains(" = ")).count();
        let all = toml::to_string(&Config::default()).unwrap();
        assert_eq!(
            documented,
            all.lines().filter(|l| l.contains(" = ")).count(),
            "every option documented"
        );
    }

    #[test]
    fn sites_parse_validate_and_round_trip() {
        let dir = std::env::temp_dir();
        let text = format!(
            "unknown_host = \"421\"\n[compression]\nenabled = true\n\
             [[site]]\nnames = [\"a.test\"]\nroot = {dir:?}\nlisting = true\n[site.cgi]\ndirs = [\"/cgi-bin\"]\n\
             [[site]]\nnames = [\"*.b.test\"]\nroot = {dir:?}\ndefault = true\n[[site.proxy.route]]\nupstream = \"u\"\n\
             [[site.proxy.upstream]]\nname = \"u\"\nservers = [\"127.0.0.1:9\"]\n"
        );
        let mut c = Config::from_toml(&text).unwrap();
        c.root = dir;
        assert_eq!(c.unknown_host, UnknownHost::Misdirected);
        assert_eq!(c.sites.len(), 2);
        assert_eq!(c.sites[0].cgi.dirs, ["/cgi-bin"]);
        assert_eq!(c.sites[1].proxy.routes.len(), 1);
        assert!(c.sites[1].default && c.compression.enabled);
        assert_eq!(c.validate(), Ok(()));
        let again = Config::from_toml(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(again, c);
        c.sites[1].names.push("A.TEST".into());
        assert!(c
            .validate()
            .unwrap_err()
            .starts_with("site *.b.test: names:"));
        c.sites[1].names.pop();
        c.compression.gzip_level = 10;
        assert!(c
            .validate()
            .unwrap_err()
            .starts_with("compression.gzip_level"));
    }

    #[test]
    fn every_option_round_trips_through_toml() {
        let c = Config::default();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::from_toml(&text).unwrap(), c);
    }
}

#[cfg(test)]
mod section_tests {
    use crate::config::Config;

    #[test]
    fn sections_parse_and_bad_values_name_the_option() {
        let c = Config::from_toml(
            "[cgi]\ndirs = [\"/cgi-bin\"]\nextensions = [\".cgi\"]\n[work]\nenabled = true\n[dynamic]\nthreads = 4\n",
        )
        .unwrap();
        assert_eq!(
            (c.cgi.dirs.len(), c.work.enabled, c.dynamic.threads),
            (1, true, 4)
        );
        let mut f = Config::from_toml(
            "[fastcgi]\nbackend = \"unix:/run/php/fpm.sock\"\nextensions = [\".php\"]\nkeepalive = 0\n",
        )
        .unwrap();
        assert_eq!((f.fastcgi.keepalive, f.fastcgi.extensions.len()), (0, 1));
        f.root = std::env::temp_dir();
        assert_eq!(f.validate(), Ok(()));
        let e = Config::from_toml("[cgi]\ntimeout = 5\n").unwrap_err();
        assert!(e.contains("timeout") && !e.contains('\n'), "{e}");
        let base = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        for (edit, name) in [
            (
                &(|c: &mut Config| c.cgi.dirs = vec!["cgi-bin".into()]) as &dyn Fn(&mut Config),
                "cgi.dirs",
            ),
            (
                &|c: &mut Config| c.cgi.dirs = vec!["/a/../b".into()],
                "cgi.dirs",
            ),
            (
                &|c: &mut Config| c.cgi.extensions = vec!["cgi".into()],
                "cgi.extensions",
            ),
            (
                &|c: &mut Config| c.cgi.max_processes = 0,
                "cgi.max_processes",
            ),
            (&|c: &mut Config| c.dynamic.queue = 0, "dynamic.queue"),
            (&|c: &mut Config| c.work.path = "/w?x".into(), "work.path"),
            (
                &|c: &mut Config| c.fastcgi.backend = "localhost:9000".into(),
                "fastcgi.backend",
            ),
            (
                &|c: &mut Config| c.fastcgi.extensions = vec!["php".into()],
                "fastcgi.extensions",
            ),
            (
                &|c: &mut Config| c.fastcgi.read_timeout_ms = 0,
                "fastcgi.read_timeout_ms",
            ),
            (
                &|c: &mut Config| c.fastcgi.multiplex = "on".into(),
                "fastcgi.multiplex",
            ),
        ] {
            let mut c = base.clone();
            edit(&mut c);
            assert!(c.validate().unwrap_err().starts_with(name), "{name}");
        }
    }
}

#[cfg(test)]
#[path = "config_listen_tests.rs"]
mod listen_tests;
