//! Who asks, and whether they may: the aggregation layer's front-proxy authentication and a
//! SubjectAccessReview, as every aggregated API server does (k8s.io/apiserver's `requestheader`
//! authenticator and delegated authorizer; metrics-server's setup).
//!
//! The API server authenticates the user, then proxies the request over TLS with its front-proxy
//! client certificate and the identity in headers (`X-Remote-User`, `X-Remote-Group`,
//! `X-Remote-Extra-*` by default). Those headers are believed only from a connection whose client
//! certificate the requestheader client CA signed, with a common name among the allowed names: the
//! TLS handshake refuses any other certificate (so a caller that forges the headers straight at the
//! port gets no answer), and the name is checked per connection. Where to find the CA and the
//! header names is the API server's: the `kube-system/extension-apiserver-authentication`
//! ConfigMap, which the `extension-apiserver-authentication-reader` Role lets this component read.

use std::collections::BTreeMap;

use http::HeaderMap;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};

/// The ConfigMap the API server publishes its client authentication settings in.
pub const AUTHENTICATION_CONFIGMAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// Why the front proxy's settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The ConfigMap could not be read.
    #[error("reading ConfigMap {}/{}: {}", AUTHENTICATION_CONFIGMAP.0, AUTHENTICATION_CONFIGMAP.1, sched_core::api_error::describe(.0))]
    Read(#[source] kube::Error),
    /// The ConfigMap has no requestheader client CA: the API server runs without an aggregation layer.
    #[error(
        "ConfigMap {}/{} has no requestheader-client-ca-file: start kube-apiserver with \
         --requestheader-client-ca-file (an aggregation layer)",
        AUTHENTICATION_CONFIGMAP.0,
        AUTHENTICATION_CONFIGMAP.1
    )]
    NoClientCa,
    /// A list value is not a JSON array of strings.
    #[error("ConfigMap {}/{}: {key} is not a JSON list of strings: {message}", AUTHENTICATION_CONFIGMAP.0, AUTHENTICATION_CONFIGMAP.1)]
    BadList {
        /// The key.
        key: String,
        /// The parser's message.
        message: String,
    },
}

/// The front proxy's settings (kube-apiserver's `--requestheader-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// The CA bundle (PEM) that signs the front proxy's client certificate.
    pub client_ca_pem: String,
    /// Common names the front proxy's certificate may have (empty: any the CA signed).
    pub allowed_names: Vec<String>,
    /// Headers that carry the user name, first non-empty wins.
    pub username_headers: Vec<String>,
    /// Headers that carry the groups.
    pub group_headers: Vec<String>,
    /// Prefixes of the headers that carry extra attributes.
    pub extra_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// Reads the API server's settings from its ConfigMap; headers it does not name get
    /// kube-apiserver's usual ones.
    pub async fn from_cluster(client: &Client) -> Result<Self, IdentityError> {
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP.0);
        let data = configmaps
            .get(AUTHENTICATION_CONFIGMAP.1)
            .await
            .map_err(IdentityError::Read)?
            .data
            .unwrap_or_default();
        let client_ca_pem = data
            .get("requestheader-client-ca-file")
            .filter(|pem| !pem.trim().is_empty())
            .cloned()
            .ok_or(IdentityError::NoClientCa)?;
        let list = |key: &str, default: &[&str]| -> Result<Vec<String>, IdentityError> {
            match data.get(key).filter(|v| !v.trim().is_empty()) {
                None => Ok(default.iter().map(|s| s.to_string()).collect()),
                Some(text) => serde_json::from_str(text).map_err(|e| IdentityError::BadList {
                    key: key.to_string(),
                    message: e.to_string(),
                }),
            }
        };
        Ok(RequestHeaderConfig {
            client_ca_pem,
            allowed_names: list("requestheader-allowed-names", &[])?,
            username_headers: list("requestheader-username-headers", &["X-Remote-User"])?,
            group_headers: list("requestheader-group-headers", &["X-Remote-Group"])?,
            extra_prefixes: list("requestheader-extra-headers-prefix", &["X-Remote-Extra-"])?,
        })
    }

    /// True when a front proxy certificate with common name `name` may pass identities.
    pub fn allows_proxy(&self, name: Option<&str>) -> bool {
        self.allowed_names.is_empty() || name.is_some_and(|n| self.allowed_names.iter().any(|a| a == n))
    }

    /// The identity the headers carry; None without a user name.
    pub fn identity(&self, headers: &HeaderMap) -> Option<Identity> {
        let values = |name: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let user = self
            .username_headers
            .iter()
            .flat_map(|h| values(h))
            .find(|u| !u.is_empty())?;
        let groups = self.group_headers.iter().flat_map(|h| values(h)).collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let name = name.as_str();
            let Some(key) = self.extra_prefixes.iter().find_map(|p| {
                name.get(..p.len())
                    .filter(|head| head.eq_ignore_ascii_case(p))
                    .map(|_| &name[p.len()..])
            }) else {
                continue;
            };
            if let Ok(value) = value.to_str() {
                extra
                    .entry(key.to_ascii_lowercase())
                    .or_default()
                    .push(value.to_string());
            }
        }
        Some(Identity { user, groups, extra })
    }
}

/// The user the API server authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name.
    pub user: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The permission an explanation of a pod in a namespace needs: listing that namespace's pods, the
/// read `kubectl sched explain` itself makes of it. A user without it learns nothing of the
/// namespace.
pub const REQUIRED_VERB: &str = "list";
/// The resource [`REQUIRED_VERB`] applies to.
pub const REQUIRED_RESOURCE: &str = "pods";

/// Asks the API server whether `identity` may list pods in `namespace` (None: in all namespaces), a
/// SubjectAccessReview.
pub async fn may_list_pods(
    client: &Client,
    identity: &Identity,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(identity.user.clone()),
            groups: Some(identity.groups.clone()),
            extra: Some(identity.extra.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: namespace.map(str::to_string),
                verb: Some(REQUIRED_VERB.to_string()),
                resource: Some(REQUIRED_RESOURCE.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = reviews.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(allowed: &[&str]) -> RequestHeaderConfig {
        RequestHeaderConfig {
            client_ca_pem: String::new(),
            allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    #[test]
    fn identity_from_headers() {
        /// Headers sent, and the user, groups and extra attributes expected (None: no identity).
        type Case<'a> = (
            &'a str,
            &'a [(&'a str, &'a str)],
            Option<(&'a str, &'a [&'a str], &'a [(&'a str, &'a str)])>,
        );
        let cases: &[Case<'_>] = &[
            ("no user", &[("x-remote-group", "g")], None),
            ("empty user", &[("x-remote-user", "")], None),
            (
                "user, groups and extra",
                &[
                    ("x-remote-user", "alice"),
                    ("x-remote-group", "dev"),
                    ("x-remote-group", "system:authenticated"),
                    ("x-remote-extra-Scopes", "a"),
                ],
                Some(("alice", &["dev", "system:authenticated"], &[("scopes", "a")])),
            ),
        ];
        for (name, headers, want) in cases {
            let mut map = HeaderMap::new();
            for (k, v) in *headers {
                map.append(
                    http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            let got = config(&[]).identity(&map);
            let want = want.map(|(user, groups, extra)| Identity {
                user: user.to_string(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                extra: extra
                    .iter()
                    .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
                    .collect(),
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn allowed_proxy_names() {
        let cases = [
            ("any name when none are listed", &[][..], Some("x"), true),
            (
                "a listed name",
                &["front-proxy-client"][..],
                Some("front-proxy-client"),
                true,
            ),
            (
                "another name",
                &["front-proxy-client"][..],
                Some("mallory"),
                false,
            ),
            ("no name", &["front-proxy-client"][..], None, false),
        ];
        for (name, allowed, cn, want) in cases {
            assert_eq!(config(allowed).allows_proxy(cn), want, "{name}");
        }
    }
}
