//! Unit tests of `sites`: virtual-host selection by Host name, default site, and config validation.

use super::*;

fn site(names: &[&str], default: bool) -> SiteConfig {
    SiteConfig {
        names: names.iter().map(|s| s.to_string()).collect(),
        default,
        root: std::env::temp_dir(),
        index: None,
        listing: None,
        cache_control: None,
        cgi: CgiConfig::default(),
        fastcgi: FastCgiConfig::default(),
        proxy: ProxyConfig::default(),
        listen: Listen::default(),
        tls_cert: PathBuf::new(),
        tls_key: PathBuf::new(),
    }
}

fn table(unknown: UnknownHost) -> HostTable {
    HostTable::new(
        &[
            site(&["a.example", "www.a.example"], false),
            site(&["*.b.example"], false),
            site(&["*.example", "B.Example."], false),
            site(&["c.example"], false),
        ],
        unknown,
    )
}

#[test]
fn exact_names_ignore_case_port_and_trailing_dot() {
    let t = table(UnknownHost::Default);
    for h in [
        "a.example",
        "A.EXAMPLE",
        "a.example:8080",
        "a.example.",
        "a.example.:80",
    ] {
        assert_eq!(t.choose(Some(h.as_bytes())), Choice::Site(0), "{h}");
    }
    assert_eq!(t.choose(Some(b"www.a.example")), Choice::Site(0));
    assert_eq!(t.choose(Some(b"b.example")), Choice::Site(2));
    assert_eq!(t.choose(Some(b"c.example")), Choice::Site(3));
}

#[test]
fn wildcards_match_deeper_names_and_the_longest_wins() {
    let t = table(UnknownHost::Default);
    assert_eq!(t.choose(Some(b"x.b.example")), Choice::Site(1));
    assert_eq!(t.choose(Some(b"y.x.B.example:1")), Choice::Site(1));
    assert_eq!(t.choose(Some(b"x.example")), Choice::Site(2));
    assert_eq!(t.choose(Some(b"z.y.example")), Choice::Site(2));
    // An exact name beats a wildcard that also matches.
    assert_eq!(t.choose(Some(b"c.example")), Choice::Site(3));
    // `*.example` does not match `example` itself.
    assert_eq!(t.choose(Some(b"example")), Choice::TopLevel);
}

#[test]
fn unknown_and_missing_hosts() {
    let t = table(UnknownHost::Default);
    assert_eq!(t.choose(Some(b"other.test")), Choice::TopLevel);
    assert_eq!(t.choose(None), Choice::TopLevel);
    assert_eq!(t.choose(Some(b"")), Choice::TopLevel);
    let long = vec![b'a'; 1000];
    assert_eq!(t.choose(Some(&long)), Choice::TopLevel);
    let t = table(UnknownHost::Misdirected);
    assert_eq!(t.choose(Some(b"other.test")), Choice::Misdirected);
    // No Host at all (HTTP/1.0) is not a misdirected request: the default site answers.
    assert_eq!(t.choose(None), Choice::TopLevel);
    let t = HostTable::new(
        &[site(&["a.example"], false), site(&["d.example"], true)],
        UnknownHost::Default,
    );
    assert_eq!(t.choose(Some(b"other.test")), Choice::Site(1));
    assert_eq!(t.choose(None), Choice::Site(1));
    assert_eq!(t.choose(Some(b"[::1]:8080")), Choice::Site(1));
}

#[test]
fn validation_names_the_site_and_the_problem() {
    let top = StaticConfig::default();
    assert_eq!(validate(&[site(&["a.example"], false)], &top), Ok(()));
    let cases: [(Vec<SiteConfig>, &str); 8] = [
        (vec![site(&[], false)], "at least one host name"),
        (vec![site(&["a.*.example"], false)], "wildcard"),
        (vec![site(&["*a.example"], false)], "wildcard"),
        (vec![site(&["a.example:80"], false)], "no port"),
        (vec![site(&["a..example"], false)], "not a host name"),
        (
            vec![site(&["a.example"], false), site(&["A.example."], false)],
            "name of site a.example already",
        ),
        (
            vec![site(&["a.example"], true), site(&["b.example"], true)],
            "default already",
        ),
        (
            vec![SiteConfig {
                root: "/definitely/not/here".into(),
                ..site(&["a.example"], false)
            }],
            "site a.example: root:",
        ),
    ];
    for (sites, want) in cases {
        let e = validate(&sites, &top).unwrap_err();
        assert!(e.contains(want) && e.starts_with("site "), "{e} / {want}");
    }
    let mut bad = site(&["a.example"], false);
    bad.index = Some(vec!["../x".into()]);
    let e = validate(&[bad], &top).unwrap_err();
    assert!(e.starts_with("site a.example: static.index"), "{e}");
}

#[test]
fn overrides_apply_over_the_top_level_static_section() {
    let top = StaticConfig {
        cache_control: "max-age=60".into(),
        ..StaticConfig::default()
    };
    let mut s = site(&["a.example"], false);
    assert_eq!(s.static_files(&top), top);
    s.listing = Some(true);
    s.cache_control = Some("no-store".into());
    s.index = Some(vec!["home.htm".into()]);
    let m = s.static_files(&top);
    assert!(m.listing && m.cache_control == "no-store" && m.index == ["home.htm"]);
    assert_eq!(m.precompressed, top.precompressed);
}

#[test]
fn parses_from_toml_with_its_own_routes() {
    let s: SiteConfig = toml::from_str(
        "names = [\"a.example\"]\nroot = \"/srv/a\"\nlisting = true\n[cgi]\ndirs = [\"/cgi-bin\"]\n[[proxy.route]]\nprefix = \"/api\"\nupstream = \"api\"\n",
    )
    .unwrap();
    assert_eq!(s.cgi.dirs, ["/cgi-bin"]);
    assert_eq!(s.proxy.routes.len(), 1);
    assert_eq!(s.listing, Some(true));
    assert!(
        toml::from_str::<SiteConfig>("names = [\"a\"]\nroot = \"/\"\nlistng = true\n").is_err()
    );
}

#[test]
fn sites_restricted_to_listeners_answer_only_there() {
    let a: SocketAddr = "127.0.0.1:80".parse().unwrap();
    let b: SocketAddr = "[::1]:80".parse().unwrap();
    let only_b = SiteConfig {
        listen: Listen(vec!["[::1]:80".into()]),
        ..site(&["v6.example"], false)
    };
    let sites = [site(&["any.example"], false), only_b.clone()];
    let on_a = HostTable::on_listener(&sites, UnknownHost::Default, Some(a));
    let on_b = HostTable::on_listener(&sites, UnknownHost::Misdirected, Some(b));
    assert_eq!(on_a.choose(Some(b"any.example")), Choice::Site(0));
    assert_eq!(on_b.choose(Some(b"any.example")), Choice::Site(0));
    assert_eq!(on_b.choose(Some(b"v6.example")), Choice::Site(1));
    // Elsewhere its names are unknown hosts.
    assert_eq!(on_a.choose(Some(b"v6.example")), Choice::TopLevel);
    let strict = HostTable::on_listener(&sites, UnknownHost::Misdirected, Some(a));
    assert_eq!(strict.choose(Some(b"v6.example")), Choice::Misdirected);
    // A restricted default site is the default only where it answers.
    let d = [SiteConfig {
        default: true,
        ..only_b.clone()
    }];
    assert_eq!(
        HostTable::on_listener(&d, UnknownHost::Default, Some(b)).choose(None),
        Choice::Site(0)
    );
    assert_eq!(
        HostTable::on_listener(&d, UnknownHost::Default, Some(a)).choose(None),
        Choice::TopLevel
    );
    // The same name may be two sites on different listeners, not on a shared one.
    let top = StaticConfig::default();
    let on = |l: &[&str]| SiteConfig {
        listen: Listen(l.iter().map(|s| s.to_string()).collect()),
        ..site(&["same.example"], false)
    };
    assert_eq!(
        validate(&[on(&["127.0.0.1:80"]), on(&["[::1]:80"])], &top),
        Ok(())
    );
    let e = validate(
        &[on(&["127.0.0.1:80"]), on(&["127.0.0.1:80", "[::1]:80"])],
        &top,
    );
    assert!(e
        .unwrap_err()
        .contains("is a name of site same.example already"));
    let e = validate(&[on(&[]), on(&["[::1]:80"])], &top);
    assert!(e.is_err());
    let e = validate(&[on(&["::1:80"])], &top).unwrap_err();
    assert!(
        e.starts_with("site same.example: listen: '::1:80' is not IP:PORT"),
        "{e}"
    );
    let half = SiteConfig {
        tls_cert: "/x.pem".into(),
        ..site(&["c.example"], false)
    };
    let e = validate(&[half], &top).unwrap_err();
    assert_eq!(
        e,
        "site c.example: tls_cert and tls_key go together (PEM files)"
    );
}
