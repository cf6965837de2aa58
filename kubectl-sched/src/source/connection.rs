//! How the API server is reached, as kubectl reaches it: the kubeconfig (`--kubeconfig`, else
//! `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account), its context, cluster and
//! user (`--context`, `--cluster`, `--user`), then kubectl's connection and impersonation flags over
//! them ([`ConnectionArgs`]), the way client-go's overrides apply (clientcmd's `DirectClientConfig`):
//!
//! - `--server` replaces the cluster's URL and, unless `--tls-server-name` is given too, its TLS server
//!   name; with `--server` no kubeconfig is needed at all (`--token` or client certificates then
//!   authenticate);
//! - `--certificate-authority` replaces the cluster's CA and turns verification on,
//!   `--insecure-skip-tls-verify` turns it off and drops the CA;
//! - `--client-certificate`/`--client-key` replace the user's certificate and key, `--token` and
//!   `--username`/`--password` replace its other credentials (token file, exec plugin, auth provider),
//!   which would otherwise take precedence in kube's client;
//! - `--as`, `--as-group`, `--as-uid`, `--as-user-extra` impersonate (kube-rs sends kubectl's
//!   `Impersonate-*` headers); groups, UID and extras need a user to impersonate, as in client-go.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::cli::{ConnectionArgs, GlobalArgs};

/// Why no client configuration could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {origin}: {source}")]
    Kubeconfig {
        /// The file (or `$KUBECONFIG`, or the default path).
        origin: String,
        /// What went wrong.
        #[source]
        source: KubeconfigError,
    },
    /// No kubeconfig, no `--server`, and not running inside a cluster.
    #[error(
        "no kubeconfig found ({origin}) and not running in a cluster ({in_cluster}); use --kubeconfig, \
         $KUBECONFIG, --server, or --from FILE"
    )]
    NoConfig {
        /// Where a kubeconfig was looked for.
        origin: String,
        /// Why the in-cluster configuration failed.
        in_cluster: String,
    },
    /// `--server` is not a URL.
    #[error("--server {server:?}: {message}")]
    Server {
        /// The value given.
        server: String,
        /// Why it is not a URL.
        message: String,
    },
    /// `--certificate-authority` could not be read as PEM certificates.
    #[error("--certificate-authority {}: {message}", .path.display())]
    CertificateAuthority {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A flag's value is malformed, or it needs another flag.
    #[error("{0}")]
    Usage(String),
}

/// The client configuration kubectl would use with these flags: the kubeconfig's, with the connection
/// flags over it.
pub async fn resolve(global: &GlobalArgs) -> Result<kube::Config, ConnectionError> {
    let flags = &global.connection;
    let options = KubeConfigOptions {
        context: global.context.clone(),
        cluster: flags.cluster.clone(),
        user: flags.user.clone(),
    };
    let loaded = match kubeconfig_config(global.kubeconfig.as_deref(), &options).await {
        // A kubeconfig that names no context, or a $KUBECONFIG file that is not there, is no obstacle
        // when --server says where to go, as in kubectl (whose defaults fill in the rest); a missing
        // --kubeconfig file is an error there too.
        Err(ConnectionError::Kubeconfig { source, .. })
            if flags.server.is_some()
                && match source {
                    KubeconfigError::CurrentContextNotSet => true,
                    KubeconfigError::ReadConfig(..) => global.kubeconfig.is_none(),
                    _ => false,
                } =>
        {
            None
        }
        other => other?,
    };
    let mut config = match loaded {
        Some(config) => config,
        // kubectl needs no kubeconfig when --server says where the API server is.
        None => match &flags.server {
            Some(server) => kube::Config::new(parse_server(server)?),
            None => kube::Config::incluster().map_err(|e| ConnectionError::NoConfig {
                origin: default_kubeconfig_origin(),
                in_cluster: e.to_string(),
            })?,
        },
    };
    apply(flags, &mut config)?;
    Ok(config)
}

/// The kubeconfig's configuration, or None when there is no kubeconfig to read and none is required
/// (no `--kubeconfig`, `--context`, `--cluster` or `--user`).
async fn kubeconfig_config(
    explicit: Option<&Path>,
    options: &KubeConfigOptions,
) -> Result<Option<kube::Config>, ConnectionError> {
    if let Some(path) = explicit {
        let origin = path.display().to_string();
        let wrap = |source| ConnectionError::Kubeconfig {
            origin: origin.clone(),
            source,
        };
        let kubeconfig = Kubeconfig::read_from(path).map_err(wrap)?;
        return kube::Config::from_custom_kubeconfig(kubeconfig, options)
            .await
            .map(Some)
            .map_err(wrap);
    }
    let named = options.context.is_some() || options.cluster.is_some() || options.user.is_some();
    if default_kubeconfig_exists() || named {
        return kube::Config::from_kubeconfig(options)
            .await
            .map(Some)
            .map_err(|source| ConnectionError::Kubeconfig {
                origin: default_kubeconfig_origin(),
                source,
            });
    }
    Ok(None)
}

/// kubectl's connection flags over `config`, as client-go's overrides apply them (see the module
/// documentation).
pub fn apply(flags: &ConnectionArgs, config: &mut kube::Config) -> Result<(), ConnectionError> {
    if let Some(server) = &flags.server {
        config.cluster_url = parse_server(server)?;
        // A server named on the command line drops the kubeconfig's TLS server name: it was the
        // kubeconfig server's.
        config.tls_server_name = None;
    }
    if let Some(name) = &flags.tls_server_name {
        config.tls_server_name = Some(name.clone());
    }
    if let Some(path) = &flags.certificate_authority {
        config.root_cert = Some(read_certificates(path)?);
        config.accept_invalid_certs = false;
    }
    if flags.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
        config.root_cert = None;
    }
    let user = &mut config.auth_info;
    if let Some(path) = &flags.client_certificate {
        user.client_certificate = Some(path.display().to_string());
        user.client_certificate_data = None;
    }
    if let Some(path) = &flags.client_key {
        user.client_key = Some(path.display().to_string());
        user.client_key_data = None;
    }
    let basic_auth = flags.username.is_some() || flags.password.is_some();
    if flags.token.is_some() || basic_auth {
        // kube's client prefers an auth provider, then basic auth, then a token, then a token file,
        // then an exec plugin: the credential typed on the command line must be the one used.
        user.auth_provider = None;
        user.exec = None;
        user.token_file = None;
        user.token = flags.token.clone().map(Into::into);
        if basic_auth {
            user.username = flags.username.clone();
            user.password = flags.password.clone().map(Into::into);
        } else {
            user.username = None;
            user.password = None;
        }
    }
    if let Some(name) = &flags.impersonate {
        user.impersonate = Some(name.clone());
    }
    if !flags.impersonate_groups.is_empty() {
        user.impersonate_groups = Some(flags.impersonate_groups.clone());
    }
    if let Some(uid) = &flags.impersonate_uid {
        user.impersonate_uid = Some(uid.clone());
    }
    if !flags.impersonate_user_extra.is_empty() {
        user.impersonate_user_extra = Some(user_extras(&flags.impersonate_user_extra)?);
    }
    let asks_more = user.impersonate_groups.as_ref().is_some_and(|g| !g.is_empty())
        || user.impersonate_uid.is_some()
        || user
            .impersonate_user_extra
            .as_ref()
            .is_some_and(|e| !e.is_empty());
    if asks_more && user.impersonate.as_deref().is_none_or(str::is_empty) {
        return Err(ConnectionError::Usage(
            "--as-group, --as-uid and --as-user-extra impersonate a user's groups, UID and extras: name \
             the user with --as"
                .to_string(),
        ));
    }
    Ok(())
}

fn parse_server(server: &str) -> Result<http::Uri, ConnectionError> {
    let invalid = |message: String| ConnectionError::Server {
        server: server.to_string(),
        message,
    };
    // As client-go: a bare host:port means https.
    let url = if server.contains("://") {
        server.to_string()
    } else {
        format!("https://{server}")
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.host().is_some() => Ok(uri),
        _ => Err(invalid(
            "not an http(s) URL with a host, e.g. https://127.0.0.1:6443".to_string(),
        )),
    }
}

fn read_certificates(path: &Path) -> Result<Vec<Vec<u8>>, ConnectionError> {
    let invalid = |message: String| ConnectionError::CertificateAuthority {
        path: path.to_path_buf(),
        message,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(e.to_string()))?
        .map(|cert| cert.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(e.to_string()))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate in the file".to_string()));
    }
    Ok(certs)
}

/// `--as-user-extra KEY=VALUE` values, a key's values in the order given.
fn user_extras(values: &[String]) -> Result<HashMap<String, Vec<String>>, ConnectionError> {
    let mut extras: HashMap<String, Vec<String>> = HashMap::new();
    for value in values {
        let Some((key, extra)) = value.split_once('=').filter(|(key, _)| !key.is_empty()) else {
            return Err(ConnectionError::Usage(format!(
                "--as-user-extra {value:?}: expected KEY=VALUE"
            )));
        };
        extras.entry(key.to_string()).or_default().push(extra.to_string());
    }
    Ok(extras)
}

fn default_kubeconfig_origin() -> String {
    match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(v) => format!("$KUBECONFIG={}", v.to_string_lossy()),
        None => "~/.kube/config".to_string(),
    }
}

fn default_kubeconfig_exists() -> bool {
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".kube").join("config"))
        .is_some_and(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The connection flags of a command line.
    fn flags(args: &[&str]) -> ConnectionArgs {
        let mut argv = vec!["kubectl-sched", "explain", "p"];
        argv.extend(args);
        crate::cli::Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .global
            .connection
    }

    /// A configuration as a kubeconfig would give: a CA, a TLS server name, an exec plugin.
    fn from_kubeconfig() -> kube::Config {
        let mut config = kube::Config::new("https://10.0.0.1:6443".parse().unwrap());
        config.root_cert = Some(vec![vec![1, 2, 3]]);
        config.tls_server_name = Some("kubernetes".to_string());
        config.auth_info.exec = Some(Default::default());
        config.auth_info.token_file = Some("/var/token".to_string());
        config.auth_info.client_certificate_data = Some("Y2VydA==".to_string());
        config
    }

    #[test]
    fn flags_override_the_kubeconfig_as_client_go_does() {
        type Check = fn(&kube::Config) -> bool;
        let cases: [(&[&str], Check); 9] = [
            (&["--server", "https://127.0.0.1:7443"], |c| {
                c.cluster_url == "https://127.0.0.1:7443/" && c.tls_server_name.is_none()
            }),
            (&["-s", "127.0.0.1:7443", "--tls-server-name", "api"], |c| {
                c.cluster_url == "https://127.0.0.1:7443/" && c.tls_server_name.as_deref() == Some("api")
            }),
            (&["--insecure-skip-tls-verify"], |c| {
                c.accept_invalid_certs && c.root_cert.is_none()
            }),
            (&["--token", "T"], |c| {
                use kube::config::AuthInfo;
                let AuthInfo {
                    token,
                    token_file,
                    exec,
                    ..
                } = &c.auth_info;
                token.is_some() && token_file.is_none() && exec.is_none()
            }),
            (&["--username", "u", "--password", "p"], |c| {
                c.auth_info.username.as_deref() == Some("u") && c.auth_info.password.is_some()
            }),
            (
                &["--client-certificate", "/c.pem", "--client-key", "/k.pem"],
                |c| {
                    c.auth_info.client_certificate.as_deref() == Some("/c.pem")
                        && c.auth_info.client_certificate_data.is_none()
                        && c.auth_info.client_key.as_deref() == Some("/k.pem")
                },
            ),
            (&["--as", "bob", "--as-group", "g1", "--as-group", "g2"], |c| {
                c.auth_info.impersonate.as_deref() == Some("bob")
                    && c.auth_info.impersonate_groups == Some(vec!["g1".into(), "g2".into()])
            }),
            (
                &[
                    "--as",
                    "bob",
                    "--as-uid",
                    "42",
                    "--as-user-extra",
                    "k=a",
                    "--as-user-extra",
                    "k=b",
                ],
                |c| {
                    c.auth_info.impersonate_uid.as_deref() == Some("42")
                        && c.auth_info
                            .impersonate_user_extra
                            .as_ref()
                            .and_then(|e| e.get("k"))
                            == Some(&vec!["a".to_string(), "b".to_string()])
                },
            ),
            // Nothing given: the kubeconfig's as it was.
            (&[], |c| {
                c.root_cert.is_some()
                    && c.tls_server_name.as_deref() == Some("kubernetes")
                    && c.auth_info.exec.is_some()
            }),
        ];
        for (args, check) in cases {
            let mut config = from_kubeconfig();
            apply(&flags(args), &mut config).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(check(&config), "{args:?}: {config:?}");
        }
    }

    #[test]
    fn flags_kubectl_refuses_are_refused_in_one_line() {
        for (args, want) in [
            (&["--as-group", "g"][..], "name the user with --as"),
            (&["--as-uid", "1"], "name the user with --as"),
            (
                &["--as", "bob", "--as-user-extra", "novalue"],
                "expected KEY=VALUE",
            ),
            (&["--server", "ftp://x"], "not an http(s) URL"),
            (&["--server", "https://"], "--server"),
            (
                &["--certificate-authority", "/nonexistent/ca.crt"],
                "--certificate-authority",
            ),
        ] {
            let err = apply(&flags(args), &mut from_kubeconfig()).expect_err(&format!("{args:?}"));
            let text = err.to_string();
            assert!(text.contains(want) && !text.contains('\n'), "{args:?}: {text}");
        }
        // Both at once is a contradiction kubectl refuses as well.
        let both = [
            "kubectl-sched",
            "explain",
            "p",
            "--insecure-skip-tls-verify",
            "--certificate-authority",
            "ca",
        ];
        assert!(crate::cli::Cli::try_parse_from(both).is_err());
    }
}
