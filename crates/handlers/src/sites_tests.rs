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
