//! Which request paths name scripts: the URL-directory and file-suffix mapping that CGI
//! (Apache `ScriptAlias`, `AddHandler cgi-script .cgi`) and FastCGI (nginx's
//! `location ~ \.php$` with `fastcgi_split_path_info`) share. Paths here are already
//! mapped (`files::path::map_path`): decoded, normalised, relative to the root, no leading
//! slash.

/// Script directories and suffixes from the configuration.
#[derive(Clone, Debug)]
pub struct ScriptNames {
    dirs: Vec<Vec<u8>>,
    extensions: Vec<Vec<u8>>,
}

impl ScriptNames {
    /// None when neither directories nor suffixes are configured (the handler is off).
    pub fn new(dirs: &[String], extensions: &[String]) -> Option<ScriptNames> {
        if dirs.is_empty() && extensions.is_empty() {
            return None;
        }
        Some(ScriptNames {
            dirs: dirs
                .iter()
                .map(|d| d.trim_matches('/').as_bytes().to_vec())
                .collect(),
            extensions: extensions.iter().map(|e| e.as_bytes().to_vec()).collect(),
        })
    }

    /// `rel` may be a script: strictly inside a script directory, or its last segment
    /// carries a script suffix after at least one other byte (`.php` alone is not one).
    pub fn is_script_name(&self, rel: &[u8]) -> bool {
        let last = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.dirs
            .iter()
            .any(|d| rel.len() > d.len() + 1 && rel.starts_with(d) && rel[d.len()] == b'/')
            || self
                .extensions
                .iter()
                .any(|e| last.ends_with(e) && last.len() > e.len())
    }

    /// `rel` is a script directory itself (a request for it is refused, not listed).
    pub fn is_dir(&self, rel: &[u8]) -> bool {
        self.dirs.iter().any(|d| d == rel)
    }
}

#[cfg(test)]
mod tests {
    use super::ScriptNames;

    #[test]
    fn directories_and_suffixes() {
        let s = ScriptNames::new(&["/cgi-bin/".into()], &[".cgi".into()]).unwrap();
        assert!(s.is_script_name(b"cgi-bin/x"));
        assert!(!s.is_script_name(b"cgi-bin"));
        assert!(!s.is_script_name(b"cgi-binx/y"));
        assert!(s.is_script_name(b"a/b.cgi"));
        assert!(!s.is_script_name(b"a/.cgi"));
        assert!(!s.is_script_name(b"a.cgi.txt"));
        assert!(s.is_dir(b"cgi-bin") && !s.is_dir(b"cgi-bin/x"));
        assert!(ScriptNames::new(&[], &[]).is_none());
    }
}
