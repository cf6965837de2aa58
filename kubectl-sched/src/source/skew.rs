//! What the API server's version says about how to list from it: newer servers serve unpaged
//! lists from their watch cache. (Which kube-scheduler release evaluates is `super::release`'s.)

use k8s_openapi::apimachinery::pkg::version::Info;

/// The first minor version whose API server serves lists without `limit` from its watch cache
/// (ConsistentListFromCache, GA in 1.34): one such request costs it about half of the same list in
/// pages. Older servers read an unpaged list from etcd in one piece, which is why kubectl pages.
const LISTS_FROM_CACHE: u32 = 34;

/// Objects per list page for `--chunk-size` left unset: one request per kind (0) when the API server
/// serves it from its watch cache, else kubectl's pages of 500 (also when the version is unknown).
pub fn default_chunk_size(info: Option<&Info>) -> u32 {
    match info.and_then(super::release::server_release) {
        Some(version) if version.minor >= LISTS_FROM_CACHE => 0,
        _ => 500,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `GET /version` answer (the other fields are not read).
    pub(in crate::source) fn info(major: &str, minor: &str, git_version: &str) -> Info {
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
            (Some(info("1", "33", "v1.33.5")), 500),
            (Some(info("", "", "")), 500),
            (None, 500),
        ];
        for (version, chunk) in cases {
            assert_eq!(default_chunk_size(version.as_ref()), chunk, "{version:?}");
        }
    }
}
