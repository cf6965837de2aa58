//! Version skew: the engine re-implements one kube-scheduler release. When the API server is of
//! another minor version, its kube-scheduler may decide differently (plugins, defaults, feature gates,
//! messages), so `explain` and `preempt` say which semantics they evaluate with.

use k8s_openapi::apimachinery::pkg::version::Info;

/// The kube-scheduler release the engine mirrors.
pub const ENGINE_VERSION: &str = "v1.37.1";
/// Its major and minor version.
const ENGINE_MINOR: (u32, u32) = (1, 37);

/// `major.minor` of a `GET /version` answer: its `major`/`minor` fields (providers append `+`, as in
/// `"37+"`), else its `gitVersion` (`v1.37.1-gke.100`). None when neither reads as a version.
fn major_minor(info: &Info) -> Option<(u32, u32)> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    if let (Some(major), Some(minor)) = (digits(&info.major), digits(&info.minor)) {
        return Some((major, minor));
    }
    let mut parts = info.git_version.strip_prefix('v')?.split('.');
    Some((digits(parts.next()?)?, digits(parts.next()?)?))
}

/// The first minor version whose API server serves lists without `limit` from its watch cache
/// (ConsistentListFromCache, GA in 1.34): one such request costs it about half of the same list in
/// pages. Older servers read an unpaged list from etcd in one piece, which is why kubectl pages.
const LISTS_FROM_CACHE: (u32, u32) = (1, 34);

/// Objects per list page for `--chunk-size` left unset: one request per kind (0) when the API server
/// serves it from its watch cache, else kubectl's pages of 500 (also when the version is unknown).
pub fn default_chunk_size(info: Option<&Info>) -> u32 {
    match info.and_then(major_minor) {
        Some(version) if version >= LISTS_FROM_CACHE => 0,
        _ => 500,
    }
}

/// The warning to print when the API server's minor version differs from the engine's (without the
/// `warning: ` prefix), or None when it is the same, or unknown.
pub fn skew_warning(info: &Info) -> Option<String> {
    let (major, minor) = major_minor(info)?;
    if (major, minor) == ENGINE_MINOR {
        return None;
    }
    let shown = if info.git_version.is_empty() {
        format!("v{major}.{minor}")
    } else {
        info.git_version.clone()
    };
    Some(format!(
        "the API server is {shown}; kubectl-sched evaluates with kube-scheduler {ENGINE_VERSION}'s semantics"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git_version: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git_version.into(),
            ..Info::default()
        }
    }

    #[test]
    fn lists_are_paged_unless_the_server_serves_them_from_its_cache() {
        let cases = [
            (Some(info("1", "37", "v1.37.1")), 0),
            (Some(info("1", "34+", "v1.34.2-gke.1")), 0),
            (Some(info("2", "0", "v2.0.0")), 0),
            (Some(info("1", "33", "v1.33.5")), 500),
            (Some(info("", "", "")), 500),
            (None, 500),
        ];
        for (version, chunk) in cases {
            assert_eq!(default_chunk_size(version.as_ref()), chunk, "{version:?}");
        }
    }

    #[test]
    fn only_another_minor_version_warns() {
        let warning = |v: &str| {
            format!("the API server is {v}; kubectl-sched evaluates with kube-scheduler v1.37.1's semantics")
        };
        let cases = [
            ("same release", info("1", "37", "v1.37.1"), None),
            ("another patch", info("1", "37", "v1.37.4"), None),
            ("provider suffix", info("1", "37+", "v1.37.2-gke.1100"), None),
            (
                "older minor",
                info("1", "36", "v1.36.3"),
                Some(warning("v1.36.3")),
            ),
            (
                "newer minor",
                info("1", "38", "v1.38.0"),
                Some(warning("v1.38.0")),
            ),
            (
                "newer minor, suffix",
                info("1", "38+", "v1.38.1-eks-1"),
                Some(warning("v1.38.1-eks-1")),
            ),
            (
                "fields empty: gitVersion",
                info("", "", "v1.35.0"),
                Some(warning("v1.35.0")),
            ),
            ("no gitVersion", info("1", "39", ""), Some(warning("v1.39"))),
            ("unreadable", info("", "", "unknown"), None),
            ("nothing", Info::default(), None),
        ];
        for (name, info, want) in cases {
            assert_eq!(skew_warning(&info), want, "{name}");
        }
    }
}
