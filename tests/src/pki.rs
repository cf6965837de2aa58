//! The throw-away PKI of one control plane: a CA, the kube-apiserver serving certificate, an
//! admin client certificate (group `system:masters`, so RBAC never gets in a test's way) and the
//! service-account token signing key, all ECDSA P-256 and written as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// Names the serving certificate answers to: the loopback address the tests dial, plus the
/// in-cluster names and the first service IP, which components and clients inside the cluster use.
const SERVING_NAMES: [&str; 7] = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.0.0.1",
];

/// Paths of the PEM files written by [`write`].
#[derive(Clone, Debug)]
pub(crate) struct PkiFiles {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    /// The public half, which kube-apiserver verifies tokens with (it reads no PKCS#8 private
    /// key there).
    pub service_account_pub: PathBuf,
    /// The aggregation layer's front-proxy CA (kube-apiserver's `--requestheader-client-ca-file`),
    /// a CA of its own as kubeadm makes it: a client certificate of the cluster CA must not pass for
    /// the front proxy.
    pub front_proxy_ca_cert: PathBuf,
    /// The front proxy's client certificate (`--proxy-client-cert-file`), common name
    /// [`FRONT_PROXY_CLIENT`].
    pub front_proxy_client_cert: PathBuf,
    /// Its key (`--proxy-client-key-file`).
    pub front_proxy_client_key: PathBuf,
}

/// The common name of the front proxy's client certificate (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// A CA certificate, its key (PEM) and its issuer.
fn new_ca(common_name: &str) -> Result<(rcgen::Certificate, String, Issuer<'static, KeyPair>), Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = subject(common_name, None);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key)?;
    let key_pem = key.serialize_pem();
    Ok((cert, key_pem, Issuer::new(params, key)))
}

fn subject(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// Generates the PKI and writes it into `dir` (created if needed).
pub(crate) fn write(dir: &Path) -> Result<PkiFiles, Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;

    let (ca_cert, ca_key_pem, issuer) = new_ca("kubectl-sched-e2e-ca")?;

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(SERVING_NAMES.map(String::from).to_vec())?;
    serving.distinguished_name = subject("kube-apiserver", None);
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name = subject("kubectl-sched-e2e-admin", Some("system:masters"));
    admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let service_account_key = KeyPair::generate()?;

    let (front_proxy_ca, _, front_proxy_issuer) = new_ca("kubectl-sched-e2e-front-proxy-ca")?;
    let front_proxy_key = KeyPair::generate()?;
    let mut front_proxy = CertificateParams::new(Vec::<String>::new())?;
    front_proxy.distinguished_name = subject(FRONT_PROXY_CLIENT, None);
    front_proxy.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    front_proxy.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let front_proxy_cert = front_proxy.signed_by(&front_proxy_key, &front_proxy_issuer)?;

    let files = PkiFiles {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
        service_account_key: dir.join("sa.key"),
        service_account_pub: dir.join("sa.pub"),
        front_proxy_ca_cert: dir.join("front-proxy-ca.crt"),
        front_proxy_client_cert: dir.join("front-proxy-client.crt"),
        front_proxy_client_key: dir.join("front-proxy-client.key"),
    };
    let contents = [
        (&files.ca_cert, ca_cert.pem()),
        (&files.ca_key, ca_key_pem),
        (&files.serving_cert, serving_cert.pem()),
        (&files.serving_key, serving_key.serialize_pem()),
        (&files.admin_cert, admin_cert.pem()),
        (&files.admin_key, admin_key.serialize_pem()),
        (&files.service_account_key, service_account_key.serialize_pem()),
        (&files.service_account_pub, service_account_key.public_key_pem()),
        (&files.front_proxy_ca_cert, front_proxy_ca.pem()),
        (&files.front_proxy_client_cert, front_proxy_cert.pem()),
        (&files.front_proxy_client_key, front_proxy_key.serialize_pem()),
    ];
    for (path, pem) in contents {
        std::fs::write(path, pem).map_err(Error::io(format!("writing {}", path.display())))?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_pem_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = write(dir.path()).expect("pki");
        for (path, header) in [
            (&files.ca_cert, "BEGIN CERTIFICATE"),
            (&files.serving_cert, "BEGIN CERTIFICATE"),
            (&files.admin_cert, "BEGIN CERTIFICATE"),
            (&files.ca_key, "BEGIN PRIVATE KEY"),
            (&files.serving_key, "BEGIN PRIVATE KEY"),
            (&files.admin_key, "BEGIN PRIVATE KEY"),
            (&files.service_account_key, "BEGIN PRIVATE KEY"),
            (&files.service_account_pub, "BEGIN PUBLIC KEY"),
        ] {
            let text = std::fs::read_to_string(path).expect("read");
            assert!(text.contains(header), "{}: {text}", path.display());
        }
    }
}
