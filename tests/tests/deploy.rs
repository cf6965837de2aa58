//! deploy/ against the real control plane.
//!
//! 1. `kubectl kustomize` of deploy/, deploy/base and each overlay passes a server-side dry run
//!    (`kubectl apply --server-side --dry-run=server`) without a warning (the namespace enforces the
//!    restricted Pod Security Standard, so PodSecurity admission checks the pod template). The
//!    cert-manager overlay needs cert-manager's CRDs: the real ones (deploy/testdata/cert-manager-*,
//!    copied from cert-manager's Go module) are installed first, and the same dry run is shown to
//!    fail without them. The self-signed overlay is built from a copy of deploy/ holding
//!    certificates made by `sched-webhook certs`' code.
//! 2. The self-signed overlay is applied for real with server-side apply, with the
//!    MutatingWebhookConfiguration pointed at a URL on 127.0.0.1 (there are no kubelets, so the
//!    Deployment never runs). sched-webhook then runs in this process with a kubeconfig holding the
//!    ServiceAccount's own token (TokenRequest, `kubectl create token`): its caches sync (`/readyz` on
//!    the admin port), the API server calls it with the overlay's caBundle, and it does its writes —
//!    PV claimRef at pods CREATE, PVC selected-node and a stale nomination cleared at pods/binding —
//!    with that token. Pods without claims are never sent (matchConditions). `kubectl auth can-i
//!    --as=system:serviceaccount:...` answers yes for every verb the webhook uses and no for a set it
//!    does not, and the token is refused those for real.
//!
//! Every variant carries the NetworkPolicy: it selects the Deployment's pods, names ports the pod
//! template has, opens the admin port to the `monitoring` namespace only, and the patch in
//! docs/webhook.md that narrows the webhook port to the control plane's CIDR passes the dry run too; after the real apply
//! the API server holds it. (The krew manifest and the release archives: tests/dist.rs.)

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use axum_server::tls_rustls::RustlsConfig;
use e2e::fixtures::ready_node;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::{
    Binding, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use sched_core::engine::{SchedulerConfig, in_tree_registry};
use sched_core::labels::Selector;
use sched_core::volumes::{ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER};
use sched_webhook::admission::{ClusterView, Operation};
use sched_webhook::controller::stored_pod::Scope;
use sched_webhook::controller::{self, ControllerConfig};
use sched_webhook::metrics::RequestOutcome;
use sched_webhook::run::{Replica, ReplicaClients};
use sched_webhook::server::{AppState, DEFAULT_MAX_CLAIMS, Limits};
use sched_webhook::serving::{Listeners, serve};

/// Where the manifests install the webhook.
const NAMESPACE: &str = "sched-webhook";
const SERVICE_ACCOUNT: &str = "sched-webhook";
const CONFIGURATION: &str = "sched-webhook";
/// The Service DNS name the self-signed overlay's certificate is made for.
const SERVICE_DNS: &str = "sched-webhook.sched-webhook.svc";
const CERT_MANAGER_CRDS: &str = "testdata/cert-manager-v1.21.2";
const PAUSE: &str = "registry.k8s.io/pause:3.10";
const HOST: &str = "kubernetes.io/hostname";
const WAIT: Duration = Duration::from_secs(60);
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(120);

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.join("deploy"))
        .unwrap_or_else(|| PathBuf::from("../deploy"))
}

/// What a kubectl run printed, and whether it exited 0.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs the pinned kubectl against the control plane as admin; a non-zero exit is returned, not an error.
async fn kubectl(cp: &ControlPlane, args: &[&str]) -> Result<Run> {
    let run = tokio::process::Command::new(cp.bin_dir().join("kubectl"))
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(KUBECTL_TIMEOUT, run)
        .await
        .with_context(|| format!("kubectl {} gave no answer in {KUBECTL_TIMEOUT:?}", args.join(" ")))??;
    Ok(Run {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Like [`kubectl`], failing on a non-zero exit.
async fn kubectl_ok(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let run = kubectl(cp, args).await?;
    ensure!(run.ok, "kubectl {} failed: {}", args.join(" "), run.stderr.trim());
    Ok(run.stdout)
}

/// The documents of a multi-document YAML stream.
fn documents(yaml: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(yaml) {
        let value = Value::deserialize(doc)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name} in the kustomize output"))
}

fn find_mut<'a>(docs: &'a mut [Value], kind: &str, name: &str) -> Result<&'a mut Value> {
    docs.iter_mut()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .with_context(|| format!("no {kind} {name} in the kustomize output"))
}

/// Writes the objects as one `kind: List` file for `kubectl apply -f`.
fn write_list(path: &Path, docs: &[Value]) -> Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    std::fs::write(path, serde_json::to_vec_pretty(&list)?)
        .with_context(|| format!("writing {}", path.display()))
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A copy of deploy/ whose self-signed overlay holds certificates made by `sched-webhook certs`' code
/// (`certs::generate` and `certs::write`, what the subcommand runs) for the Service name and `ips`.
fn deploy_copy_with_certs(ips: &[std::net::IpAddr]) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let copy = dir.path().join("deploy");
    copy_tree(&deploy_dir(), &copy)?;
    let generated = sched_webhook::certs::generate(&[SERVICE_DNS.to_string()], ips, 2)?;
    sched_webhook::certs::write(&copy.join("overlays/self-signed/certs"), &generated)?;
    // The mutual-TLS overlay's certs/: what `sched-webhook certs --client-cert kube-apiserver` writes.
    let mtls = copy.join("overlays/self-signed-mtls/certs");
    sched_webhook::certs::write(&mtls, &generated)?;
    sched_webhook::certs::write_client(
        &mtls,
        &sched_webhook::certs::generate_client("kube-apiserver", 2)?,
    )?;
    Ok((dir, copy))
}

use e2e::fixtures::eventually;

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    Ok(serde_json::from_value(value)?)
}

#[tokio::test]
async fn kustomize_output_of_deploy_base_and_every_overlay_passes_a_server_side_dry_run() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let deploy = deploy_dir();
    let (_copy_dir, copy) = deploy_copy_with_certs(&[])?;
    let work = tempfile::tempdir()?;
    let variants = [
        ("base", deploy.join("base")),
        ("cert-manager", deploy.join("overlays/cert-manager")),
        // deploy/ itself: the cert-manager overlay, the default installation.
        ("deploy", deploy.clone()),
        ("self-signed", copy.join("overlays/self-signed")),
        ("control-plane-cidr", control_plane_cidr_overlay(&copy)?),
        ("self-signed-mtls", copy.join("overlays/self-signed-mtls")),
        // The in-cluster explainer (its own namespace, cert-manager's certificate).
        ("explainer", deploy.join("explainer")),
    ];
    let mut rendered = Vec::new();
    for (name, dir) in &variants {
        let yaml = kubectl_ok(&cp, &["kustomize", &dir.display().to_string()]).await?;
        let docs = documents(&yaml).with_context(|| format!("kustomize output of {name}"))?;
        let file = work.path().join(format!("{name}.json"));
        write_list(&file, &docs)?;
        rendered.push((*name, docs, file));
    }

    // A server-side dry run creates nothing, so the namespaced objects of one apply cannot find a
    // namespace created by the same apply: the Namespace of the output is applied for real first.
    let (_, base_docs, _) = &rendered[0];
    let (_, explainer_docs, _) = rendered.last().context("the explainer's output")?;
    let namespace_file = work.path().join("namespace.json");
    write_list(
        &namespace_file,
        &[
            find(base_docs, "Namespace", NAMESPACE)?.clone(),
            find(explainer_docs, "Namespace", "sched-explainer")?.clone(),
        ],
    )?;
    kubectl_ok(
        &cp,
        &[
            "apply",
            "--server-side",
            "-f",
            &namespace_file.display().to_string(),
        ],
    )
    .await?;

    // Without cert-manager's CRDs the cert-manager overlay is refused: the dry run checks for real.
    let (_, _, cert_manager_file) = &rendered[1];
    let refused = kubectl(
        &cp,
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            &cert_manager_file.display().to_string(),
        ],
    )
    .await?;
    ensure!(
        !refused.ok && refused.stderr.contains("cert-manager.io/v1"),
        "the cert-manager overlay must need cert-manager's CRDs; kubectl said: {}{}",
        refused.stdout,
        refused.stderr
    );
    let crds = deploy.join(CERT_MANAGER_CRDS);
    kubectl_ok(
        &cp,
        &["apply", "--server-side", "-f", &crds.display().to_string()],
    )
    .await?;
    kubectl_ok(
        &cp,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/certificates.cert-manager.io",
            "crd/issuers.cert-manager.io",
        ],
    )
    .await?;

    for (name, docs, file) in &rendered {
        // The CRDs' discovery can lag behind Established for a moment: retry a refused kind briefly.
        let file = file.display().to_string();
        let deadline = Instant::now() + WAIT;
        let out = loop {
            let run = kubectl(&cp, &["apply", "--server-side", "--dry-run=server", "-f", &file]).await?;
            if run.ok {
                // The namespace enforces the restricted Pod Security Standard; PodSecurity admission
                // warns about a Deployment whose pod template would violate it.
                ensure!(
                    !run.stderr.contains("Warning"),
                    "dry run of {name} warned: {}",
                    run.stderr.trim()
                );
                break run.stdout;
            }
            ensure!(
                run.stderr.contains("ensure CRDs are installed first") && Instant::now() < deadline,
                "dry run of {name} refused: {}",
                run.stderr.trim()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let applied = out
            .lines()
            .filter(|l| l.ends_with("serverside-applied (server dry run)"))
            .count();
        ensure!(
            applied == docs.len(),
            "{name}: {} objects rendered, {applied} accepted by the dry run:\n{out}",
            docs.len()
        );
        println!("{name}: {applied} objects pass a server-side dry run");
    }

    // Nothing but the namespace and the CRDs exists: the dry runs wrote nothing.
    let left = kubectl(&cp, &["get", "deployment", "-n", NAMESPACE, "sched-webhook"]).await?;
    ensure!(!left.ok, "the dry run created the Deployment");

    // Every variant of the webhook restricts who may connect to the pods. (The explainer's port
    // refuses, in the TLS handshake, every client but the API server's front proxy.)
    for (name, docs, _) in rendered.iter().filter(|(name, _, _)| *name != "explainer") {
        check_network_policy(docs).with_context(|| format!("the NetworkPolicy of {name}"))?;
    }
    let (_, narrowed, _) = &rendered[4];
    let policy = find(narrowed, "NetworkPolicy", "sched-webhook")?;
    ensure!(
        policy["spec"]["ingress"][0]["from"] == json!([{"ipBlock": {"cidr": CONTROL_PLANE_CIDR}}]),
        "the patch in docs/webhook.md narrows the webhook port to the control plane: {}",
        policy["spec"]["ingress"]
    );

    // What each variant adds to the webhook configuration.
    let (_, cert_manager_docs, _) = &rendered[1];
    ensure!(
        &rendered[2].1 == cert_manager_docs,
        "deploy/ installs the cert-manager overlay"
    );
    let hook = find(cert_manager_docs, "MutatingWebhookConfiguration", CONFIGURATION)?;
    ensure!(
        hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == format!("{NAMESPACE}/sched-webhook-serving"),
        "cert-manager injects the serving certificate's CA: {}",
        hook["metadata"]
    );
    let (_, self_signed_docs, _) = &rendered[3];
    let hook = find(self_signed_docs, "MutatingWebhookConfiguration", CONFIGURATION)?;
    let ca_bundle: String = hook["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .context("the self-signed overlay sets caBundle")?
        .split_whitespace()
        .collect();
    let ca_file = std::fs::read_to_string(copy.join("overlays/self-signed/certs/ca.crt"))?;
    ensure!(
        ca_bundle == sched_webhook::certs::ca_bundle_base64(&ca_file),
        "caBundle is the CA `sched-webhook certs` wrote"
    );
    let secret = self_signed_docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .context("the self-signed overlay generates the TLS Secret")?;
    ensure!(
        secret["data"].get("ca.key").is_none(),
        "the CA key stays out of the cluster"
    );
    let deployment = find(self_signed_docs, "Deployment", "sched-webhook")?;
    ensure!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
            == secret["metadata"]["name"],
        "the Deployment mounts the generated Secret"
    );
    ensure!(
        hook["webhooks"][0]["sideEffects"] == "None",
        "admission writes nothing: sideEffects None, {}",
        hook["webhooks"][0]["sideEffects"]
    );
    check_mutual_tls_overlay(&rendered[5].1, &copy.join("overlays/self-signed-mtls/certs"))?;
    Ok(())
}

/// The mutual-TLS overlay: the webhook is started with `--client-ca-file` naming a file of a mounted
/// Secret that holds exactly the client CA `sched-webhook certs --client-cert` wrote (and no key), and
/// the rest is the self-signed overlay's (caBundle from the serving CA).
fn check_mutual_tls_overlay(docs: &[Value], certs: &Path) -> Result<()> {
    let deployment = find(docs, "Deployment", "sched-webhook")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .context("container args")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let ca_path = args
        .iter()
        .find_map(|a| a.strip_prefix("--client-ca-file="))
        .with_context(|| format!("the mTLS overlay passes --client-ca-file: {args:?}"))?;
    let (dir, file) = ca_path.rsplit_once('/').context("an absolute path")?;
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .context("volume mounts")?
        .iter()
        .find(|m| m["mountPath"] == dir)
        .with_context(|| format!("a volume is mounted at {dir}"))?;
    let volume = pod["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .find(|v| v["name"] == mount["name"])
        .context("the mounted volume exists")?;
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == volume["secret"]["secretName"])
        .with_context(|| format!("the overlay generates the Secret {}", volume["secret"]))?;
    let data = secret["data"].as_object().context("Secret data")?;
    ensure!(
        data.keys().collect::<Vec<_>>() == [file],
        "the client-CA Secret holds {file} only (no key): {:?}",
        data.keys().collect::<Vec<_>>()
    );
    let client_ca = std::fs::read_to_string(certs.join("client-ca.crt"))?;
    // kustomize wraps the base64 of generated data in lines.
    let mounted: String = data[file]
        .as_str()
        .context("Secret data is a string")?
        .split_whitespace()
        .collect();
    ensure!(
        mounted == sched_webhook::certs::ca_bundle_base64(&client_ca),
        "the mounted {file} is the client CA `sched-webhook certs --client-cert` wrote"
    );
    let hook = find(docs, "MutatingWebhookConfiguration", CONFIGURATION)?;
    let serving_ca = std::fs::read_to_string(certs.join("ca.crt"))?;
    let ca_bundle: String = hook["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .context("the mTLS overlay sets caBundle")?
        .split_whitespace()
        .collect();
    ensure!(
        ca_bundle == sched_webhook::certs::ca_bundle_base64(&serving_ca),
        "caBundle is the serving CA, not the client CA"
    );
    Ok(())
}

/// The control plane's CIDR in docs/webhook.md's NetworkPolicy patch.
const CONTROL_PLANE_CIDR: &str = "192.0.2.0/28";

/// An overlay over the base with the patch in docs/webhook.md that admits the webhook port from the control
/// plane's nodes only ("Who can call the webhook").
fn control_plane_cidr_overlay(copy: &Path) -> Result<PathBuf> {
    let dir = copy.join("overlays/control-plane-cidr");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base
patches:
  - target:
      kind: NetworkPolicy
      name: sched-webhook
    patch: |-
      - op: add
        path: /spec/ingress/0/from
        value:
          - ipBlock:
              cidr: {CONTROL_PLANE_CIDR}
"
        ),
    )?;
    Ok(dir)
}

/// The NetworkPolicy selects exactly the Deployment's pods, its ports are ports of the pod template,
/// the admin port is open to the monitoring namespace only, and it governs ingress only.
fn check_network_policy(docs: &[Value]) -> Result<()> {
    let policy = find(docs, "NetworkPolicy", "sched-webhook")?;
    let deployment = find(docs, "Deployment", "sched-webhook")?;
    ensure!(
        policy["metadata"]["namespace"] == NAMESPACE,
        "{}",
        policy["metadata"]
    );
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        from_json(policy["spec"]["podSelector"].clone())?;
    let selector = Selector::from_label_selector(Some(&selector))?;
    ensure!(
        !selector.is_everything(),
        "the policy selects the webhook's pods, not every pod"
    );
    let labels: std::collections::BTreeMap<String, String> =
        from_json(deployment["spec"]["template"]["metadata"]["labels"].clone())?;
    ensure!(
        selector.matches(&labels),
        "the policy selects the pod template {labels:?}"
    );
    let deployment_selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        from_json(deployment["spec"]["selector"].clone())?;
    ensure!(
        Some(&policy["spec"]["podSelector"]["matchLabels"])
            == serde_json::to_value(&deployment_selector)?.get("matchLabels"),
        "the policy selects what the Deployment selects"
    );
    ensure!(policy["spec"]["policyTypes"] == json!(["Ingress"]));
    let container_ports: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .context("container ports")?
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let rules = policy["spec"]["ingress"].as_array().context("ingress rules")?;
    ensure!(
        rules.len() == 2,
        "a rule for the webhook port and one for the admin port"
    );
    for (rule, port) in rules.iter().zip(["webhook", "admin"]) {
        ensure!(
            rule["ports"] == json!([{"port": port, "protocol": "TCP"}]),
            "{}",
            rule["ports"]
        );
        ensure!(
            container_ports.contains(&port),
            "{port} is a port of the pod template"
        );
    }
    ensure!(
        rules[1]["from"]
            == json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]),
        "the admin port is open to the monitoring namespace only: {}",
        rules[1]["from"]
    );
    Ok(())
}

/// One `kubectl auth can-i` as the webhook's ServiceAccount, in every namespace.
async fn can_i(cp: &ControlPlane, verb: &str, resource: &str) -> Result<bool> {
    can_i_in(cp, None, verb, resource).await
}

/// One `kubectl auth can-i` as the webhook's ServiceAccount, in `namespace` (None: all of them).
async fn can_i_in(cp: &ControlPlane, namespace: Option<&str>, verb: &str, resource: &str) -> Result<bool> {
    let who = format!("--as=system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(format!("--subresource={s}"))),
        None => (resource, None),
    };
    let mut args = vec!["auth", "can-i", verb, resource, who.as_str()];
    match namespace {
        Some(ns) => args.extend(["-n", ns]),
        None => args.push("-A"),
    }
    if let Some(s) = &subresource {
        args.push(s);
    }
    let run = kubectl(cp, &args).await?;
    match run.stdout.trim() {
        "yes" if run.ok => Ok(true),
        "no" if !run.ok => Ok(false),
        _ => bail!(
            "kubectl {}: unexpected answer {:?} {:?}",
            args.join(" "),
            run.stdout,
            run.stderr
        ),
    }
}

/// Every call sched-webhook makes (webhook/src/cache.rs, webhook/src/server.rs, core/src/apply.rs).
const NEEDED: &[(&str, &str)] = &[
    ("list", "pods"),
    ("watch", "pods"),
    ("get", "pods"),
    ("patch", "pods/status"),
    ("list", "nodes"),
    ("watch", "nodes"),
    ("list", "namespaces"),
    ("watch", "namespaces"),
    ("get", "persistentvolumes"),
    ("list", "persistentvolumes"),
    ("watch", "persistentvolumes"),
    ("update", "persistentvolumes"),
    ("get", "persistentvolumeclaims"),
    ("list", "persistentvolumeclaims"),
    ("watch", "persistentvolumeclaims"),
    ("update", "persistentvolumeclaims"),
    ("get", "storageclasses.storage.k8s.io"),
    ("list", "storageclasses.storage.k8s.io"),
    ("watch", "storageclasses.storage.k8s.io"),
    ("list", "csinodes.storage.k8s.io"),
    ("watch", "csinodes.storage.k8s.io"),
    ("list", "csidrivers.storage.k8s.io"),
    ("watch", "csidrivers.storage.k8s.io"),
    ("list", "csistoragecapacities.storage.k8s.io"),
    ("watch", "csistoragecapacities.storage.k8s.io"),
    ("list", "volumeattachments.storage.k8s.io"),
    ("watch", "volumeattachments.storage.k8s.io"),
];

/// The controller's Lease, in the webhook's own namespace only (a Role, not the ClusterRole).
const NEEDED_IN_NAMESPACE: &[(&str, &str)] = &[
    ("get", "leases.coordination.k8s.io"),
    ("create", "leases.coordination.k8s.io"),
    ("patch", "leases.coordination.k8s.io"),
];

/// What it must not be able to do.
const NOT_NEEDED: &[(&str, &str)] = &[
    ("get", "secrets"),
    ("list", "secrets"),
    ("get", "configmaps"),
    ("create", "pods"),
    ("update", "pods"),
    ("patch", "pods"),
    ("delete", "pods"),
    ("create", "pods/binding"),
    ("create", "pods/eviction"),
    ("update", "pods/status"),
    ("update", "nodes"),
    ("patch", "nodes"),
    ("get", "nodes"),
    ("create", "persistentvolumes"),
    ("delete", "persistentvolumes"),
    ("patch", "persistentvolumes"),
    ("update", "persistentvolumes/status"),
    ("create", "persistentvolumeclaims"),
    ("delete", "persistentvolumeclaims"),
    ("patch", "persistentvolumeclaims"),
    ("update", "storageclasses.storage.k8s.io"),
    ("create", "events"),
    ("create", "events.events.k8s.io"),
    ("list", "poddisruptionbudgets.policy"),
    ("create", "serviceaccounts/token"),
    (
        "patch",
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    ),
    ("update", "clusterroles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("impersonate", "users"),
    ("get", "leases.coordination.k8s.io"),
    ("delete", "leases.coordination.k8s.io"),
];

/// A kubeconfig for the same API server holding only a bearer token.
async fn token_kubeconfig(cp: &ControlPlane, token: &str, path: &Path) -> Result<()> {
    let admin = kubectl_ok(cp, &["config", "view", "--raw", "--flatten", "-o", "json"]).await?;
    let mut config: Value = serde_json::from_str(&admin)?;
    let users = config["users"]
        .as_array_mut()
        .context("the admin kubeconfig has users")?;
    for user in users {
        user["user"] = json!({ "token": token });
    }
    std::fs::write(path, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

/// The webhook, running in a runtime of its own (a test's runtime ends with the test).
struct RunningWebhook {
    state: Arc<AppState>,
    admin: std::net::SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl RunningWebhook {
    /// Starts it as `sched-webhook serve --kubeconfig FILE --tls-cert .. --tls-key ..` does: the client
    /// from `run::client` (the binary's own), the caches, both ports.
    fn start(kubeconfig: &Path, cert: &Path, key: &Path, webhook: TcpListener) -> Result<Self> {
        let admin = TcpListener::bind("127.0.0.1:0")?;
        let admin_address = admin.local_addr()?;
        let tls = sched_webhook::tls::server_config(cert, key)?;
        let kubeconfig = kubeconfig.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sched-webhook".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!("webhook runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let client = match sched_webhook::run::client(Some(&kubeconfig)).await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = tx.send(Err(anyhow::anyhow!("webhook client: {e}")));
                            return;
                        }
                    };
                    // The controller as the Deployment runs it: its Lease in the webhook's namespace
                    // (the Role of deploy/), every namespace but kube-system and the opted-out.
                    let controller_config = ControllerConfig {
                        lease_name: "sched-webhook".into(),
                        lease_namespace: NAMESPACE.into(),
                        identity: "deploy-test".into(),
                        lease_seconds: 4,
                        scope: Scope {
                            namespaces: Selector::from_label_selector(Some(
                                &sched_webhook::config::parse_label_selector(
                                    "kubernetes.io/metadata.name!=kube-system,kubectl-sched.dev/webhook!=ignore",
                                )
                                .map_err(anyhow::Error::msg)
                                .expect("the default selector parses"),
                            ))
                            .expect("valid selector"),
                            max_claims: DEFAULT_MAX_CLAIMS,
                            binding_window: controller::DEFAULT_BINDING_WINDOW,
                        },
                        plan_budget: controller::DEFAULT_PLAN_BUDGET,
                        concurrency: controller::DEFAULT_CONCURRENCY,
                    };
                    let replica = Replica::start(
                        ReplicaClients::shared(&client),
                        SchedulerConfig::default_config(&in_tree_registry()),
                        Limits::default(),
                        controller_config,
                    );
                    let state = replica.state.clone();
                    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                    let _ = tx.send(Ok((state.clone(), stop)));
                    let served = serve(
                        state,
                        Listeners { webhook, admin },
                        RustlsConfig::from_config(tls),
                        async {
                            let _ = stopped.await;
                        },
                        Duration::from_secs(2),
                    )
                    .await;
                    replica.stop().await;
                    if let Err(e) = served {
                        eprintln!("sched-webhook stopped: {e}");
                    }
                });
            })?;
        let (state, stop) = rx.recv_timeout(WAIT)??;
        Ok(RunningWebhook {
            state,
            admin: admin_address,
            _stop: stop,
        })
    }

    /// Every request the webhook answered so far.
    fn requests(&self) -> u64 {
        let outcomes = [
            RequestOutcome::Allowed,
            RequestOutcome::Patched,
            RequestOutcome::Denied,
            RequestOutcome::Rejected,
        ];
        Operation::ALL
            .iter()
            .flat_map(|op| outcomes.iter().map(move |o| (*op, *o)))
            .map(|(op, o)| self.state.metrics.requests(op, o))
            .sum()
    }

    /// GET on the admin port, as the kubelet's probes do: (status code, body).
    async fn admin_get(&self, path: &str) -> Result<(u16, String)> {
        let mut stream = tokio::net::TcpStream::connect(self.admin).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response)).await??;
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP response: {response:?}"))?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    }
}

fn forbidden<T>(result: std::result::Result<T, kube::Error>, what: &str) -> Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        Err(e) => bail!("{what}: expected 403 Forbidden, got {e}"),
        Ok(_) => bail!("{what}: expected 403 Forbidden, but it was allowed"),
    }
}

fn pod(name: &str, cpu: &str, claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}],
            "volumes": volumes,
        },
    })
}

fn binding(pod: &str, node: &str) -> Result<Binding> {
    from_json(json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }))
}

fn nominated(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref())
}

#[tokio::test]
async fn manifests_apply_and_the_webhook_works_with_its_service_accounts_token_only() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let admin = cp.client()?;

    // The self-signed overlay, with the certificate also valid for 127.0.0.1 and the webhook
    // configuration sent to a URL there instead of the Service.
    let (_copy_dir, copy) = deploy_copy_with_certs(&["127.0.0.1".parse()?])?;
    let certs = copy.join("overlays/self-signed/certs");
    let webhook_listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("https://{}/mutate", webhook_listener.local_addr()?);
    let yaml = kubectl_ok(
        &cp,
        &[
            "kustomize",
            &copy.join("overlays/self-signed").display().to_string(),
        ],
    )
    .await?;
    let mut docs = documents(&yaml)?;
    {
        let hook = find_mut(&mut docs, "MutatingWebhookConfiguration", CONFIGURATION)?;
        let client_config = &mut hook["webhooks"][0]["clientConfig"];
        let service = client_config
            .as_object_mut()
            .and_then(|c| c.remove("service"))
            .context("the manifest targets the Service")?;
        ensure!(service["namespace"] == NAMESPACE && service["name"] == "sched-webhook");
        client_config["url"] = json!(url);
    }
    let work = tempfile::tempdir()?;
    let manifests = work.path().join("manifests.json");
    write_list(&manifests, &docs)?;
    let run = kubectl(
        &cp,
        &[
            "apply",
            "--server-side",
            "--field-manager=deploy-e2e",
            "-f",
            &manifests.display().to_string(),
        ],
    )
    .await?;
    ensure!(
        run.ok && !run.stderr.contains("Warning"),
        "server-side apply: {}",
        run.stderr.trim()
    );
    let out = run.stdout;
    let applied = out.lines().filter(|l| l.ends_with("serverside-applied")).count();
    ensure!(
        applied == docs.len(),
        "{} objects, {applied} applied:\n{out}",
        docs.len()
    );
    println!("server-side apply accepted all {applied} objects of the self-signed overlay");
    let policies: Api<k8s_openapi::api::networking::v1::NetworkPolicy> =
        Api::namespaced(admin.clone(), NAMESPACE);
    let stored = serde_json::to_value(policies.get("sched-webhook").await?)?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(admin.clone(), NAMESPACE);
    let stored_deployment = serde_json::to_value(deployments.get("sched-webhook").await?)?;
    check_network_policy(&[
        json!({"kind": "NetworkPolicy", "metadata": stored["metadata"], "spec": stored["spec"]}),
        json!({"kind": "Deployment", "metadata": stored_deployment["metadata"], "spec": stored_deployment["spec"]}),
    ])
    .context("the NetworkPolicy the API server stored")?;

    // RBAC, asked of the API server as the ServiceAccount.
    for (verb, resource) in NEEDED {
        ensure!(
            can_i(&cp, verb, resource).await?,
            "the ServiceAccount cannot {verb} {resource}, which the webhook needs"
        );
    }
    for (verb, resource) in NOT_NEEDED {
        ensure!(
            !can_i(&cp, verb, resource).await?,
            "the ServiceAccount can {verb} {resource}, which the webhook does not need"
        );
    }
    for (verb, resource) in NEEDED_IN_NAMESPACE {
        ensure!(
            can_i_in(&cp, Some(NAMESPACE), verb, resource).await?,
            "the ServiceAccount cannot {verb} {resource} in {NAMESPACE}, which the controller needs"
        );
        ensure!(
            !can_i_in(&cp, Some("default"), verb, resource).await?,
            "the ServiceAccount can {verb} {resource} outside its namespace"
        );
    }
    println!(
        "kubectl auth can-i: {} needed verbs yes (and {} in {NAMESPACE} only), {} others no",
        NEEDED.len(),
        NEEDED_IN_NAMESPACE.len(),
        NOT_NEEDED.len()
    );

    // The webhook, with nothing but the ServiceAccount's token (TokenRequest API).
    let service_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    service_accounts.get(SERVICE_ACCOUNT).await?;
    let token = kubectl_ok(
        &cp,
        &[
            "create",
            "token",
            SERVICE_ACCOUNT,
            "-n",
            NAMESPACE,
            "--duration=1h",
        ],
    )
    .await?;
    let kubeconfig = work.path().join("sched-webhook.kubeconfig");
    token_kubeconfig(&cp, token.trim(), &kubeconfig).await?;
    let webhook = RunningWebhook::start(
        &kubeconfig,
        &certs.join("tls.crt"),
        &certs.join("tls.key"),
        webhook_listener,
    )?;
    ensure!(webhook.admin_get("/healthz").await?.0 == 200, "/healthz");
    let synced = Instant::now();
    eventually("/readyz to answer 200", WAIT, || async {
        Ok((webhook.admin_get("/readyz").await?.0 == 200).then_some(()))
    })
    .await?;
    println!(
        "/readyz 200 after {:.2} s: every reflector listed with the token",
        synced.elapsed().as_secs_f64()
    );
    let metrics = webhook.admin_get("/metrics").await?;
    ensure!(metrics.0 == 200 && !metrics.1.is_empty(), "/metrics");

    // The token is refused what the webhook does not need.
    let as_webhook = sched_webhook::run::client(Some(&kubeconfig)).await?;
    let ns = cp.new_namespace("deploy").await?;
    forbidden(
        Api::<Secret>::namespaced(as_webhook.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await,
        "list secrets",
    )?;
    forbidden(
        Api::<Pod>::namespaced(as_webhook.clone(), &ns)
            .delete("anything", &DeleteParams::default())
            .await,
        "delete a pod",
    )?;

    // The cluster: two nodes, a local PV on node 0, a static and a dynamic WaitForFirstConsumer class.
    let node = |i: usize| format!("{ns}-n{i}");
    let nodes: Api<Node> = Api::all(admin.clone());
    for i in 0..2 {
        nodes
            .create(
                &PostParams::default(),
                &ready_node(&node(i), &ns, "1", "4Gi", "110"),
            )
            .await?;
    }
    forbidden(
        Api::<Node>::all(as_webhook.clone())
            .patch(
                &node(0),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await,
        "patch a node",
    )?;
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(admin.clone());
    let local = format!("{ns}-local");
    let dynamic = format!("{ns}-dynamic");
    for (class, provisioner) in [
        (&local, NOT_SUPPORTED_PROVISIONER),
        (&dynamic, "deploy.e2e.kubectl-sched.dev/provisioner"),
    ] {
        classes
            .create(
                &PostParams::default(),
                &from_json(json!({
                    "metadata": {"name": class},
                    "provisioner": provisioner,
                    "volumeBindingMode": "WaitForFirstConsumer",
                }))?,
            )
            .await?;
    }
    let pv_name = format!("{ns}-pv0");
    let pvs: Api<PersistentVolume> = Api::all(admin.clone());
    pvs.create(
        &PostParams::default(),
        &from_json(json!({
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": local,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/e2e"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": HOST, "operator": "In", "values": [node(0)]}
                ]}]}},
            },
        }))?,
    )
    .await?;
    // No PV controller runs here: mark the PV Available as it would.
    pvs.patch_status(
        &pv_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Available"}})),
    )
    .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &ns);
    for (claim, class) in [("static", &local), ("dynamic", &dynamic)] {
        claims
            .create(
                &PostParams::default(),
                &from_json(json!({
                    "metadata": {"name": claim},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": class,
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }))?,
            )
            .await?;
    }
    eventually("the webhook cache to hold the PV and claims", WAIT, || async {
        let snapshot = webhook.state.cache.volume_snapshot();
        let available = snapshot
            .persistent_volumes
            .get(&pv_name)
            .is_some_and(|pv| pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"));
        let claims = snapshot.pvc(&ns, "static").is_some() && snapshot.pvc(&ns, "dynamic").is_some();
        Ok((available && claims && snapshot.node(&node(1)).is_some()).then_some(()))
    })
    .await?;

    // The API server picks the configuration up from its informer: wait until it calls the webhook
    // (dry-run creates: the webhook writes nothing for them).
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let running = &webhook;
    let mut attempt = 0;
    eventually("the API server to call the webhook", WAIT, || {
        attempt += 1;
        let pods = pods.clone();
        let dry_run = dry_run.clone();
        let before = running.requests();
        let mut probe = pod(&format!("probe-{attempt}"), "10m", &["static"]);
        probe["spec"]["nodeName"] = json!(node(0));
        async move {
            pods.create(&dry_run, &from_json(probe)?).await?;
            Ok((running.requests() > before).then_some(()))
        }
    })
    .await?;
    ensure!(
        pvs.get(&pv_name).await?.spec.and_then(|s| s.claim_ref).is_none(),
        "a dry-run pod bound nothing (admission writes nothing; sideEffects: None)"
    );

    // matchConditions: a pod without claims is never sent.
    let before = webhook.requests();
    pods.create(&PostParams::default(), &from_json(pod("no-claims", "10m", &[]))?)
        .await?;
    ensure!(
        webhook.requests() == before,
        "a pod without claims was sent to the webhook"
    );
    // ... and one with a generic ephemeral volume (a claim made from a template) is.
    let mut ephemeral = pod("ephemeral", "10m", &[]);
    ephemeral["spec"]["volumes"] = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": dynamic,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }}}]);
    pods.create(&dry_run, &from_json(ephemeral)?).await?;
    ensure!(
        webhook.requests() == before + 1,
        "a pod with an ephemeral volume was not sent to the webhook"
    );

    // pods CREATE on a node: once stored, the controller binds the static claim's PV with the token
    // (PV update), holding its Lease in the webhook's namespace (the Role).
    let mut on_node = pod("on-node", "100m", &["static"]);
    on_node["spec"]["nodeName"] = json!(node(0));
    pods.create(&PostParams::default(), &from_json(on_node)?).await?;
    let claim_ref = eventually("the static claim's PV to be claimed", WAIT, || async {
        Ok(pvs.get(&pv_name).await?.spec.and_then(|s| s.claim_ref).map(|r| {
            format!(
                "{}/{}",
                r.namespace.unwrap_or_default(),
                r.name.unwrap_or_default()
            )
        }))
    })
    .await?;
    ensure!(
        claim_ref == format!("{ns}/static"),
        "PV claimRef after pods CREATE: {claim_ref:?}"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    let holder = leases
        .get("sched-webhook")
        .await?
        .spec
        .and_then(|s| s.holder_identity);
    ensure!(
        holder.as_deref() == Some("deploy-test"),
        "Lease holder: {holder:?}"
    );

    // pods/binding: PreBind of the dynamic claim for the target node (PVC update), and the stale
    // nomination of a lower-priority pod that no longer fits there is cleared (pods/status patch).
    let high = format!("{ns}-high");
    let priority_classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(admin.clone());
    priority_classes
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": high}, "value": 1000}))?,
        )
        .await?;
    pods.create(&PostParams::default(), &from_json(pod("waiting", "800m", &[]))?)
        .await?;
    pods.patch_status(
        "waiting",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"nominatedNodeName": node(1)}})),
    )
    .await?;
    let mut bound = pod("bound", "800m", &["dynamic"]);
    bound["spec"]["priorityClassName"] = json!(high);
    pods.create(&PostParams::default(), &from_json(bound)?).await?;
    eventually("the webhook cache to see the nomination", WAIT, || async {
        let seen = webhook.state.cache.nominated_pods(&node(1)).len() == 1
            && webhook.state.cache.pod(&ns, "bound").is_some();
        Ok(seen.then_some(()))
    })
    .await?;
    let bindings_before = webhook
        .state
        .metrics
        .requests(Operation::PodBinding, RequestOutcome::Allowed);
    let _: Value = pods
        .create_subresource(
            "binding",
            "bound",
            &PostParams::default(),
            &binding("bound", &node(1))?,
        )
        .await?;
    ensure!(
        webhook
            .state
            .metrics
            .requests(Operation::PodBinding, RequestOutcome::Allowed)
            > bindings_before,
        "the binding was sent to the webhook"
    );
    let selected = eventually("the dynamic claim to name the node", WAIT, || async {
        Ok(claims
            .get("dynamic")
            .await?
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_SELECTED_NODE)
            .cloned())
    })
    .await?;
    ensure!(
        selected == node(1),
        "selected-node of the dynamic claim after the binding: {selected:?}"
    );
    // Nomination clearing follows the stored binding (the controller): give it a moment.
    eventually(
        "the stale nomination to be cleared",
        Duration::from_secs(10),
        || async { Ok(nominated(&pods.get("waiting").await?).is_none().then_some(())) },
    )
    .await?;
    println!(
        "with the ServiceAccount token: PV {pv_name} bound to {ns}/static at pods CREATE; \
         {ns}/dynamic selected-node {} and the stale nomination of {ns}/waiting cleared at pods/binding",
        node(1)
    );
    Ok(())
}
