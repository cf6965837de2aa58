//! `sched-webhook certs`: a self-signed CA and a serving certificate (for a Service DNS name, or
//! 127.0.0.1 for local runs), written as PEM files, and the CA written as `caBundle` into the
//! MutatingWebhookConfiguration that sends pods and pods/binding to the webhook.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};

/// The webhook's name inside the configuration.
pub const WEBHOOK_NAME: &str = "prebind.kubectl-sched.dev";
/// The field manager of the configuration.
pub const FIELD_MANAGER: &str = "sched-webhook";

/// Why certificates could not be made or installed.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Neither a DNS name nor an IP address was given.
    #[error("give at least one --dns-name or --ip")]
    NoSubject,
    /// rcgen failed.
    #[error("failed to generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Writing a file failed.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Applying the webhook configuration failed.
    #[error("failed to apply MutatingWebhookConfiguration {name}: {source}")]
    Apply {
        /// The configuration's name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// A CA and a serving certificate signed by it, in PEM.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The CA certificate (the `caBundle`).
    pub ca_cert_pem: String,
    /// The CA key (kept to re-sign, never served).
    pub ca_key_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving key.
    pub key_pem: String,
}

/// Generates a CA and a serving certificate for the names and addresses, valid for `days`.
pub fn generate(dns_names: &[String], ips: &[IpAddr], days: i64) -> Result<Generated, CertError> {
    if dns_names.is_empty() && ips.is_empty() {
        return Err(CertError::NoSubject);
    }
    let ca_name = "sched-webhook CA";
    let (not_before, not_after) = validity(days);

    let mut params = CertificateParams::new(dns_names.to_vec())?;
    params
        .subject_alt_names
        .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(
        DnType::CommonName,
        dns_names
            .first()
            .cloned()
            .or_else(|| ips.first().map(ToString::to_string))
            .unwrap_or_default(),
    );
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    signed_by_new_ca(ca_name, not_before, not_after, &params)
}

/// Generates a second CA and a client certificate it signed (extended key usage clientAuth, common
/// name `common_name`), valid for `days`: the API server presents the pair when it calls the
/// webhook, and the webhook (`--client-ca-file`) trusts that CA only. In the result, `cert_pem` and
/// `key_pem` are the client's.
pub fn generate_client(common_name: &str, days: i64) -> Result<Generated, CertError> {
    let ca_name = "sched-webhook client CA";
    let (not_before, not_after) = validity(days);

    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    signed_by_new_ca(ca_name, not_before, not_after, &params)
}

/// From an hour ago (clock skew) to `days` from now.
fn validity(days: i64) -> (time::OffsetDateTime, time::OffsetDateTime) {
    let now = time::OffsetDateTime::now_utc();
    (now - time::Duration::hours(1), now + time::Duration::days(days))
}

/// A new CA named `ca_name`, valid for the same time, and the leaf `params` it signed with a new key.
fn signed_by_new_ca(
    ca_name: &str,
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
    params: &CertificateParams,
) -> Result<Generated, CertError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Generated {
        ca_cert_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Where [`write`] put the files.
#[derive(Debug, Clone)]
pub struct Files {
    /// `ca.crt`.
    pub ca_cert: PathBuf,
    /// `ca.key`.
    pub ca_key: PathBuf,
    /// `tls.crt`.
    pub cert: PathBuf,
    /// `tls.key`.
    pub key: PathBuf,
}

fn write_file(path: &Path, contents: &str, private: bool) -> Result<(), CertError> {
    let err = |source| CertError::Write {
        path: path.to_path_buf(),
        source,
    };
    // Write next to the target and rename, so a reloading server never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).map_err(err)?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    std::fs::rename(&tmp, path).map_err(err)
}

/// Writes `ca.crt`, `ca.key`, `tls.crt` and `tls.key` into `dir` (created if needed).
pub fn write(dir: &Path, generated: &Generated) -> Result<Files, CertError> {
    write_named(dir, generated, ["ca.crt", "ca.key", "tls.crt", "tls.key"])
}

/// Writes a [`generate_client`] result as `client-ca.crt`, `client-ca.key`, `client.crt` and
/// `client.key` into `dir` (created if needed).
pub fn write_client(dir: &Path, generated: &Generated) -> Result<Files, CertError> {
    write_named(
        dir,
        generated,
        ["client-ca.crt", "client-ca.key", "client.crt", "client.key"],
    )
}

/// Writes the CA pair and the leaf pair under these names (CA cert, CA key, cert, key).
fn write_named(dir: &Path, generated: &Generated, names: [&str; 4]) -> Result<Files, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let [ca_cert, ca_key, cert, key] = names.map(|name| dir.join(name));
    let files = Files {
        ca_cert,
        ca_key,
        cert,
        key,
    };
    write_file(&files.ca_cert, &generated.ca_cert_pem, false)?;
    write_file(&files.ca_key, &generated.ca_key_pem, true)?;
    // Key first: a reloader that sees the new certificate then finds its key.
    write_file(&files.key, &generated.key_pem, true)?;
    write_file(&files.cert, &generated.cert_pem, false)?;
    Ok(files)
}

/// Where the API server sends reviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A URL (`https://127.0.0.1:8443/mutate` for local runs).
    Url(String),
    /// A Service: namespace, name, port, path.
    Service {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Port.
        port: i32,
        /// Path (`/mutate`).
        path: String,
    },
}

impl Target {
    /// Parses `NAMESPACE/NAME[:PORT]` (port 443, path /mutate).
    pub fn service(spec: &str) -> Option<Target> {
        let (namespace, rest) = spec.split_once('/')?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, port.parse().ok()?),
            None => (rest, 443),
        };
        (!namespace.is_empty() && !name.is_empty()).then(|| Target::Service {
            namespace: namespace.to_string(),
            name: name.to_string(),
            port,
            path: "/mutate".to_string(),
        })
    }

    fn client_config(&self, ca_pem: &str) -> WebhookClientConfig {
        let ca_bundle = Some(ByteString(ca_pem.as_bytes().to_vec()));
        match self {
            Target::Url(url) => WebhookClientConfig {
                url: Some(url.clone()),
                ca_bundle,
                service: None,
            },
            Target::Service {
                namespace,
                name,
                port,
                path,
            } => WebhookClientConfig {
                url: None,
                ca_bundle,
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port: Some(*port),
                    path: Some(path.clone()),
                }),
            },
        }
    }
}

/// The matchCondition of deploy/base/mutatingwebhookconfiguration.yaml: every binding (nominations are
/// cleared for any pod; the object of pods/binding is a Binding, so this test comes first), and only
/// pods with claims, so the API server never calls the webhook for the pods that need nothing. A pods
/// CREATE has no `subResource` at all: reading it unguarded is a CEL error ("no such key"), which
/// fails the request under `failurePolicy: Fail` (and counts as an evaluation error under `Ignore`).
pub const MATCH_CONDITION_NAME: &str = "binding-or-pod-with-claims";
/// The CEL expression of [`MATCH_CONDITION_NAME`].
pub const MATCH_CONDITION_EXPRESSION: &str = "(has(request.subResource) && request.subResource == 'binding') || \
(has(object.spec) && has(object.spec.volumes) && \
object.spec.volumes.exists(v, has(v.persistentVolumeClaim) || has(v.ephemeral)))";

/// The configuration: pods CREATE and pods/binding CREATE, fail open, side effects skipped on dry run,
/// reinvoked if a later webhook changes the pod, `kube-system` and namespaces labelled
/// `kubectl-sched.dev/webhook: ignore` (the webhook's own) excluded.
pub fn webhook_configuration(name: &str, target: &Target, ca_pem: &str) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: WEBHOOK_NAME.to_string(),
            admission_review_versions: vec!["v1".to_string()],
            client_config: target.client_config(ca_pem),
            side_effects: "None".to_string(),
            failure_policy: Some("Ignore".to_string()),
            reinvocation_policy: Some("IfNeeded".to_string()),
            timeout_seconds: Some(5),
            match_policy: Some("Equivalent".to_string()),
            namespace_selector: Some(LabelSelector {
                match_expressions: Some(vec![
                    LabelSelectorRequirement {
                        key: "kubernetes.io/metadata.name".to_string(),
                        operator: "NotIn".to_string(),
                        values: Some(vec!["kube-system".to_string()]),
                    },
                    LabelSelectorRequirement {
                        key: "kubectl-sched.dev/webhook".to_string(),
                        operator: "NotIn".to_string(),
                        values: Some(vec!["ignore".to_string()]),
                    },
                ]),
                match_labels: None,
            }),
            match_conditions: Some(vec![MatchCondition {
                name: MATCH_CONDITION_NAME.to_string(),
                expression: MATCH_CONDITION_EXPRESSION.to_string(),
            }]),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".to_string()]),
                operations: Some(vec!["CREATE".to_string()]),
                resources: Some(vec!["pods".to_string(), "pods/binding".to_string()]),
                scope: Some("Namespaced".to_string()),
            }]),
            ..MutatingWebhook::default()
        }]),
    }
}

/// Creates or updates the configuration (server-side apply, forced: this tool owns it).
pub async fn apply_webhook_configuration(
    client: &Client,
    configuration: &MutatingWebhookConfiguration,
) -> Result<MutatingWebhookConfiguration, CertError> {
    let name = configuration.metadata.name.clone().unwrap_or_default();
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut body = serde_json::to_value(configuration).unwrap_or_default();
    body["apiVersion"] = "admissionregistration.k8s.io/v1".into();
    body["kind"] = "MutatingWebhookConfiguration".into();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|source| CertError::Apply { name, source })
}

/// The base64 of a PEM, as `caBundle` shows in YAML.
pub fn ca_bundle_base64(ca_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_ca_and_a_serving_pair_rustls_accepts() {
        let generated =
            generate(&["svc.ns.svc".into()], &["127.0.0.1".parse().expect("ip")], 30).expect("certs");
        assert!(generated.ca_cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let dir = tempfile::tempdir().expect("tempdir");
        let files = write(dir.path(), &generated).expect("written");
        crate::tls::server_config(&files.cert, &files.key).expect("rustls accepts the pair");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files.key).expect("key").permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is private");
        assert!(matches!(generate(&[], &[], 1), Err(CertError::NoSubject)));
    }

    #[test]
    fn generates_a_client_pair_that_the_client_ca_verifier_accepts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let serving = generate(&[], &["127.0.0.1".parse().expect("ip")], 1).expect("certs");
        let serving = write(dir.path(), &serving).expect("written");
        let client = generate_client("kube-apiserver", 1).expect("client certs");
        let client = write_client(dir.path(), &client).expect("written");
        assert!(client.cert.ends_with("client.crt") && client.ca_cert.ends_with("client-ca.crt"));
        let files = crate::tls::TlsFiles::new(&serving.cert, &serving.key).with_client_ca(&client.ca_cert);
        crate::tls::server_config_for(&files).expect("rustls accepts the client CA");
        // A file without a certificate is refused with its name.
        let files = crate::tls::TlsFiles::new(&serving.cert, &serving.key).with_client_ca(&client.key);
        let error = crate::tls::server_config_for(&files)
            .expect_err("a key is no CA")
            .to_string();
        assert!(
            error.contains("client CA") && error.contains("client.key"),
            "{error}"
        );
    }

    #[test]
    fn configuration_targets_pods_and_bindings() {
        let cfg = webhook_configuration("sched", &Target::Url("https://127.0.0.1:1/mutate".into()), "PEM");
        let hook = &cfg.webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(hook.side_effects, "None");
        assert_eq!(hook.client_config.ca_bundle.as_ref().expect("ca").0, b"PEM");
        let resources = hook.rules.as_ref().expect("rules")[0]
            .resources
            .clone()
            .expect("resources");
        assert_eq!(resources, vec!["pods".to_string(), "pods/binding".to_string()]);
        // The same matchCondition as the manifests of deploy/, so both installs send the same requests.
        let condition = &hook.match_conditions.as_ref().expect("matchConditions")[0];
        let manifest = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/mutatingwebhookconfiguration.yaml"),
        )
        .expect("the deploy manifest");
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(manifest.contains(&format!("- name: {}", condition.name)));
        assert!(
            words(&manifest).contains(&words(&condition.expression)),
            "{}",
            condition.expression
        );
        assert_eq!(
            Target::service("ns/svc:8443"),
            Some(Target::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                port: 8443,
                path: "/mutate".into()
            })
        );
        assert_eq!(Target::service("svc"), None);
    }
}
