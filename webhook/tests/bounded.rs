//! The sched-webhook binary under hostile load, against the real kube-apiserver of the e2e harness
//! (`tests/controlplane/build.sh` builds it): memory stays under the Deployment's limit when large
//! pods arrive together, and missing claims cost a bounded number of API reads, counted both by the
//! webhook and by the API server itself. Loopback only; every load is bounded in count and time.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use e2e::fixtures::ready_node;
use e2e::{ControlPlane, Options};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The Deployment's memory limit (deploy/base/deployment.yaml).
const MEMORY_LIMIT: u64 = 512 * 1024 * 1024;
const WAIT: Duration = Duration::from_secs(120);

/// The webhook binary, started against a control plane; killed when dropped.
struct Binary {
    child: tokio::process::Child,
    port: u16,
    admin: u16,
    ca: String,
    _dir: tempfile::TempDir,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Binary {
    async fn start(cp: &ControlPlane) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let generated = sched_webhook::certs::generate(&[], &["127.0.0.1".parse()?], 1)?;
        let files = sched_webhook::certs::write(dir.path(), &generated)?;
        let (port, admin) = (free_port()?, free_port()?);
        let log = std::fs::File::create(dir.path().join("webhook.log"))?;
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sched-webhook"))
            .args([
                "serve",
                "--lease-namespace",
                "default",
                "--identity",
                "bounded-test",
            ])
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .arg("--tls-cert")
            .arg(&files.cert)
            .arg("--tls-key")
            .arg(&files.key)
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--admin-listen=127.0.0.1:{admin}"))
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting the sched-webhook binary")?;
        let mut binary = Binary {
            child,
            port,
            admin,
            ca: generated.ca_cert_pem,
            _dir: dir,
        };
        let started = Instant::now();
        while binary.admin_get("/readyz").await.ok().map(|(code, _)| code) != Some(200) {
            if let Some(status) = binary.child.try_wait()? {
                bail!("sched-webhook exited: {status}; log:\n{}", binary.log());
            }
            ensure!(
                started.elapsed() < WAIT,
                "not ready in {WAIT:?}; log:\n{}",
                binary.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(binary)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("webhook.log")).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// A `/proc/<pid>/status` field in bytes (VmRSS, VmHWM).
    fn memory(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024
    }

    async fn admin_get(&self, path: &str) -> Result<(u16, String)> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.admin)).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let code = response.get(9..12).unwrap_or("0").parse()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((code, body))
    }

    /// A counter of the webhook's /metrics.
    async fn metric(&self, name: &str) -> Result<u64> {
        let (_, text) = self.admin_get("/metrics").await?;
        metric_value(&text, name).with_context(|| format!("{name} in /metrics"))
    }

    /// POSTs an AdmissionReview over TLS, as the API server does; the answered review.
    async fn review(&self, review: &Value) -> Result<Value> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls::pki_types::pem::PemObject::from_pem_slice(
            self.ca.as_bytes(),
        )?)?;
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let mut tls = connector
            .connect(
                rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned(),
                tcp,
            )
            .await?;
        let body = review.to_string();
        let head = format!(
            "POST /mutate?timeout=5s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        tls.write_all(head.as_bytes()).await?;
        tls.write_all(body.as_bytes()).await?;
        let mut response = Vec::new();
        tokio::time::timeout(WAIT, tls.read_to_end(&mut response)).await??;
        let text = String::from_utf8_lossy(&response);
        let (head, body) = text.split_once("\r\n\r\n").context("no HTTP body")?;
        ensure!(head.starts_with("HTTP/1.1 200"), "answer: {head}");
        Ok(serde_json::from_str(body)?)
    }
}

/// The value of an unlabelled (or the first matching labelled) sample.
fn metric_value(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|v| v as u64)
}

fn review(uid: &str, namespace: &str, pod: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"].clone(), "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "load"},
            "object": pod,
        }
    })
}

fn pod(name: &str, node: &str, claims: &[String]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            "volumes": volumes,
        },
    })
}

/// A node, a claim `c1` in `namespace`, and the webhook binary synced on them.
async fn setup(cp: &ControlPlane, namespace: &str) -> Result<Binary> {
    let client = cp.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(
            &PostParams::default(),
            &ready_node("n1", "bounded", "8", "16Gi", "110"),
        )
        .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, namespace);
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "c1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }))?,
        )
        .await?;
    Binary::start(cp).await
}

#[tokio::test]
async fn eight_concurrent_3mb_pods_stay_under_the_deployments_memory_limit() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let ns = cp.new_namespace("big").await?;
    let webhook = setup(&cp, &ns).await?;
    let ready = webhook.memory("VmRSS");

    // Just under the 3 MiB body limit, one claim each (so the pod is decided on), in the shape that
    // multiplies most when decoded: many small volumes (3.3 KB each once decoded). Four pods of
    // 40,000 volumes (over 250 MB each decoded), four of 15,000 plus environment to the same size.
    let big = |name: &str, volumes: usize, variables: usize| {
        let mut p = pod(name, "n1", &["c1".to_string()]);
        let env: Vec<Value> = (0..variables)
            .map(|i| json!({"name": format!("VARIABLE_{i:06}"), "value": "x".repeat(72)}))
            .collect();
        p["spec"]["containers"][0]["env"] = json!(env);
        if let Some(list) = p["spec"]["volumes"].as_array_mut() {
            list.extend((0..volumes).map(|i| json!({"name": format!("e{i}"), "emptyDir": {}})));
        }
        p
    };
    let pods: Vec<Value> = (0..8)
        .map(|i| {
            if i % 2 == 0 {
                big(&format!("big-{i}"), 40_000, 14_000)
            } else {
                big(&format!("big-{i}"), 15_000, 21_000)
            }
        })
        .collect();
    for p in &pods {
        let size = review("u", &ns, p.clone()).to_string().len();
        ensure!(size > 2_500_000 && size < 3 * 1024 * 1024, "review size {size}");
    }

    let started = Instant::now();
    let answers = futures::future::join_all(pods.into_iter().enumerate().map(|(i, p)| {
        let webhook = &webhook;
        let ns = ns.clone();
        async move { webhook.review(&review(&format!("u-{i}"), &ns, p)).await }
    }))
    .await;
    let elapsed = started.elapsed();
    let (mut shed, mut too_large) = (0, 0);
    for answer in answers {
        let answer = answer?;
        ensure!(answer["response"]["allowed"] == json!(true), "{answer}");
        let warning = answer["response"]["warnings"][0].as_str().unwrap_or("");
        shed += usize::from(warning.contains("saturated"));
        too_large += usize::from(warning.contains("too large"));
    }
    let size = 2.8;
    let peak = webhook.memory("VmHWM");
    println!(
        "8 concurrent ~{size} MB pods: answered in {:.2} s, {too_large} too large to check, {shed} shed; RSS at ready {:.0} MiB, peak {:.0} MiB (limit 512 MiB)",
        elapsed.as_secs_f64(),
        ready as f64 / 1048576.0,
        peak as f64 / 1048576.0
    );
    ensure!(
        peak < MEMORY_LIMIT,
        "peak RSS {peak} over the limit; log:\n{}",
        webhook.log()
    );
    ensure!(
        too_large == 4,
        "the four 40,000-volume pods are not decoded: {too_large}"
    );
    ensure!(shed as u64 == webhook.metric("sched_webhook_requests_shed_total").await?);
    Ok(())
}

/// GETs of persistentvolumeclaims the API server has answered so far (its own metrics).
async fn apiserver_claim_gets(cp: &ControlPlane) -> Result<u64> {
    let client = cp.client()?;
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"persistentvolumeclaims\"")
                && l.contains("verb=\"GET\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

#[tokio::test]
async fn ten_thousand_missing_claims_cost_a_bounded_number_of_reads() -> Result<()> {
    let cp = ControlPlane::start(Options::new()).await?;
    let ns = cp.new_namespace("missing").await?;
    let webhook = setup(&cp, &ns).await?;
    let before = apiserver_claim_gets(&cp).await?;

    // 10,000 claims that do not exist: more than a pod is considered with; nothing is read.
    let claims: Vec<String> = (0..10_000).map(|i| format!("missing-{i}")).collect();
    let started = Instant::now();
    let answer = webhook
        .review(&review("u-10k", &ns, pod("many", "n1", &claims)))
        .await?;
    ensure!(answer["response"]["allowed"] == json!(true), "{answer}");
    let warning = answer["response"]["warnings"][0].as_str().unwrap_or("");
    ensure!(warning.contains("10000 claims"), "{warning}");
    ensure!(webhook.metric("sched_webhook_catch_up_reads_total").await? == 0);
    let after_10k = apiserver_claim_gets(&cp).await?;

    // As many as are considered (256), all missing: at most 32 reads.
    let claims: Vec<String> = (0..256).map(|i| format!("missing-{i}")).collect();
    let answer = webhook
        .review(&review("u-256", &ns, pod("some", "n1", &claims)))
        .await?;
    ensure!(answer["response"]["allowed"] == json!(true), "{answer}");
    let reads = webhook.metric("sched_webhook_catch_up_reads_total").await?;
    let after_256 = apiserver_claim_gets(&cp).await?;
    println!(
        "10,000 missing claims: {} claim reads at the API server; 256 missing: {reads} reads by the webhook, {} at the API server; {:.2} s",
        after_10k - before,
        after_256 - after_10k,
        started.elapsed().as_secs_f64()
    );
    ensure!(
        after_10k == before,
        "reads for the 10,000-claim pod: {}",
        after_10k - before
    );
    ensure!(reads == 32, "the webhook read {reads} claims");
    ensure!(
        after_256 - after_10k <= 32,
        "the API server answered {} claim GETs",
        after_256 - after_10k
    );
    Ok(())
}
