//! The explainer's faults against the real control plane: kube-apiserver killed and started
//! again, a watch expired (410 Gone behind an etcd compaction), the explainer itself killed and
//! started again. Each asserts that answers resume, what `/readyz` says meanwhile, and that nothing
//! stale is answered without its age.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use e2e::ControlPlane;
use e2e::fixtures::eventually;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common::{Lab, pod};
use super::{
    FRESHNESS, START, as_front_proxy, caught_up, cli, control_plane, explainer, rv_of,
    snapshot_resource_version,
};

/// The explanation object of `pod` through the API server as the admin (None: not found, or the
/// explainer unavailable or not listed yet).
async fn explanation(client: &Client, namespace: &str, pod: &str) -> Result<Option<Value>> {
    let path = format!("/apis/sched.kubectl-sched.io/v1alpha1/namespaces/{namespace}/podexplanations/{pod}");
    let request = http::Request::get(&path).body(Vec::new())?;
    match client.request::<Value>(request).await {
        Ok(answer) => Ok(Some(answer)),
        Err(kube::Error::Api(status)) if [404, 429, 500, 503].contains(&status.code) => Ok(None),
        // The API server coming back: its connections refused or reset.
        Err(kube::Error::HyperError(_) | kube::Error::Service(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An answer carries its age: a resourceVersion always, and when the snapshot is not in sync the
/// time it has been so and a warning the CLI prints. Returns whether it was in sync.
fn carries_its_age(answer: &Value) -> Result<bool> {
    let snapshot = &answer["snapshot"];
    ensure!(
        snapshot["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "an answer without the snapshot's resourceVersion: {answer}"
    );
    let in_sync = snapshot["inSync"]
        .as_bool()
        .with_context(|| format!("an answer without inSync: {answer}"))?;
    if !in_sync {
        let stale = snapshot["staleSeconds"].as_f64().unwrap_or_default();
        let warned = answer["answer"]["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|w| w.as_str().is_some_and(|w| w.contains("the explainer")));
        ensure!(
            stale > 0.0 && warned,
            "an answer out of sync without its age (staleSeconds {stale}, warned {warned}): {answer}"
        );
    }
    Ok(in_sync)
}

/// Asks through the CLI until `pod` is explained (`found`) or not found (`!found`).
async fn until_explained(cp: &ControlPlane, namespace: &str, pod: &str, found: bool) -> Result<()> {
    let what = format!(
        "{pod} to be {} through the cluster",
        if found { "explained" } else { "not found" }
    );
    eventually(&what, START, || async {
        let out = cli(cp, &["explain", pod, "-n", namespace, "--via", "cluster"]).await?;
        let done = if found {
            out.status.code() == Some(0) && String::from_utf8_lossy(&out.stdout).contains(pod)
        } else {
            out.status.code() == Some(1) && String::from_utf8_lossy(&out.stderr).contains("not found")
        };
        Ok(done.then_some(()))
    })
    .await
}

/// kube-apiserver killed and started again (every watch broken): while it is down the explainer
/// says it is unready; once it is back every answer carries its age until the snapshot is in sync
/// again, the explainer is ready again, and a pod created after the restart is explained through
/// the cluster.
#[tokio::test]
async fn answers_resume_after_an_api_server_restart() -> Result<()> {
    let lab = Lab::begin_on("explainer-restart", control_plane).await?;
    let explainer = explainer(lab.cp).await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    let before = lab.create_pod(&pod("before").cpu("3")).await?;
    caught_up(&lab.client, &lab.ns, "before", rv_of(&before)).await?;
    eventually("the explainer to be ready", START, || async {
        Ok((explainer.readyz().await == Some(200)).then_some(()))
    })
    .await?;
    ensure!(
        lab.cp.stop_component(e2e::KUBE_APISERVER),
        "kube-apiserver was not running"
    );
    let unready = eventually(
        "/readyz to say unready while kube-apiserver is down",
        FRESHNESS,
        || async { Ok(explainer.readyz().await.filter(|code| *code == 503)) },
    )
    .await;
    lab.cp.start_component(e2e::KUBE_APISERVER).await?;
    unready?;
    let restarted = Instant::now();
    let out_of_sync = std::sync::atomic::AtomicUsize::new(0);
    eventually("answers in sync again", START, || async {
        let Some(answer) = explanation(&lab.client, &lab.ns, "before").await? else {
            return Ok(None);
        };
        if carries_its_age(&answer)? {
            return Ok(Some(()));
        }
        out_of_sync.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(None)
    })
    .await?;
    eventually("the explainer to be ready again", FRESHNESS, || async {
        Ok((explainer.readyz().await == Some(200)).then_some(()))
    })
    .await?;
    lab.create_pod(&pod("after-restart").cpu("3")).await?;
    until_explained(lab.cp, &lab.ns, "after-restart", true).await?;
    eprintln!(
        "kube-apiserver restarted → in sync, ready and a new pod explained in {:.2} s ({} answers out of sync, each with its age)",
        restarted.elapsed().as_secs_f64(),
        out_of_sync.load(std::sync::atomic::Ordering::Relaxed)
    );
    Ok(())
}

/// One JSON call to etcd's gRPC gateway (`/v3/...`): the answer's body.
async fn etcd_call(address: std::net::SocketAddr, path: &str, body: Value) -> Result<Value> {
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.0\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let call = async {
        let mut tcp = tokio::net::TcpStream::connect(address).await?;
        tcp.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        tcp.read_to_end(&mut answer).await?;
        anyhow::Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .context("etcd did not answer in 10 s")??;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    ensure!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "etcd {path}: {answer}"
    );
    serde_json::from_str(body).with_context(|| format!("etcd {path}: {body}"))
}

/// Base64 of a key, as the gateway takes it.
fn etcd_key(key: &str) -> String {
    use std::fmt::Write;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in key.as_bytes().chunks(3) {
        let bytes = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(bytes[0]) << 16) | (u32::from(bytes[1]) << 8) | u32::from(bytes[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let _ = write!(out, "{}", ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A watch of the namespace's pods from `resource_version`: true when kube-apiserver answers 410
/// Gone (None: it is not serving watches yet).
async fn watch_is_gone(client: &Client, namespace: &str, resource_version: u64) -> Result<Option<bool>> {
    use futures::StreamExt;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = kube::api::WatchParams::default().timeout(1);
    match pods.watch(&params, &resource_version.to_string()).await {
        Err(kube::Error::Api(status)) if status.code == 410 => Ok(Some(true)),
        Err(kube::Error::Api(status)) if status.code == 429 || status.code == 503 => Ok(None),
        Err(e) => Err(e.into()),
        Ok(stream) => {
            let mut stream = std::pin::pin!(stream);
            match stream.next().await {
                Some(Ok(kube::api::WatchEvent::Error(status))) if status.code == 410 => Ok(Some(true)),
                Some(Ok(kube::api::WatchEvent::Error(status))) if status.code == 429 => Ok(None),
                _ => Ok(Some(false)),
            }
        }
    }
}

/// A watch expired (410 Gone): while kube-apiserver is down a pod is deleted in etcd itself (a
/// change no watch delivers) and etcd is compacted past it, so the explainer's resourceVersion is
/// gone when it watches again. It must list again: the pod deleted unseen is not found any more,
/// the one kept still is, and a pod created afterwards is explained.
#[tokio::test]
async fn a_watch_expired_by_compaction_lists_again() -> Result<()> {
    let lab = Lab::begin_on("explainer-gone", control_plane).await?;
    explainer(lab.cp).await?;
    let etcd = lab.cp.etcd_address().context("etcd's client address")?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pod(&pod("kept").cpu("3")).await?;
    let unseen = lab.create_pod(&pod("deleted-unseen").cpu("3")).await?;
    caught_up(&lab.client, &lab.ns, "kept", rv_of(&unseen)).await?;
    let watched_at = snapshot_resource_version(&lab.client, &lab.ns, "kept")
        .await?
        .context("the explainer's resourceVersion")?;
    ensure!(
        lab.cp.stop_component(e2e::KUBE_APISERVER),
        "kube-apiserver was not running"
    );
    let changed = async {
        let key = format!("/registry/pods/{}/deleted-unseen", lab.ns);
        let deleted = etcd_call(etcd, "/v3/kv/deleterange", json!({"key": etcd_key(&key)})).await?;
        ensure!(
            deleted["deleted"] == "1",
            "the pod's key was not in etcd: {deleted}"
        );
        let revision = deleted["header"]["revision"].clone();
        etcd_call(
            etcd,
            "/v3/kv/compaction",
            json!({"revision": revision, "physical": true}),
        )
        .await?;
        anyhow::Ok(())
    }
    .await;
    lab.cp.start_component(e2e::KUBE_APISERVER).await?;
    changed?;
    let restarted = Instant::now();
    // The fault is the one named: kube-apiserver answers 410 Gone to the explainer's resourceVersion.
    let gone = eventually("kube-apiserver to serve watches again", START, || {
        watch_is_gone(&lab.client, &lab.ns, watched_at)
    })
    .await?;
    ensure!(
        gone,
        "a watch from resourceVersion {watched_at} was not answered 410 Gone"
    );
    until_explained(lab.cp, &lab.ns, "deleted-unseen", false).await?;
    until_explained(lab.cp, &lab.ns, "kept", true).await?;
    lab.create_pod(&pod("after-gone").cpu("3")).await?;
    until_explained(lab.cp, &lab.ns, "after-gone", true).await?;
    eprintln!(
        "410 Gone → listed again (the pod deleted unseen gone, a new one explained) in {:.2} s",
        restarted.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The explainer killed (its runtime dropped, as SIGKILL would) and started again: nothing listens
/// while it is down; once `/readyz` says ready again its snapshot has what changed meanwhile (a pod
/// created, one deleted), answered in sync, and answers through the API server resume.
#[tokio::test]
async fn answers_resume_after_the_explainer_is_killed() -> Result<()> {
    let lab = Lab::begin_on("explainer-killed", control_plane).await?;
    let explainer = explainer(lab.cp).await?;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    let before = lab.create_pod(&pod("before").cpu("3")).await?;
    caught_up(&lab.client, &lab.ns, "before", rv_of(&before)).await?;
    explainer.kill();
    ensure!(
        explainer.readyz().await.is_none(),
        "the killed explainer still answers /readyz"
    );
    let meanwhile = lab.create_pod(&pod("while-down").cpu("3")).await?;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    pods.delete("before", &DeleteParams::default().grace_period(0))
        .await?;
    explainer.restart()?;
    let restarted = Instant::now();
    eventually("the restarted explainer to be ready", START, || async {
        Ok((explainer.readyz().await == Some(200)).then_some(()))
    })
    .await?;
    // Ready means listed: the front proxy's call (what the API server sends) is answered in sync
    // at once, with the pod created while the explainer was down.
    let pki = lab.cp.dir().join("pki");
    let read =
        |name: &str| std::fs::read_to_string(pki.join(name)).with_context(|| format!("reading {name}"));
    let (proxy_cert, proxy_key) = (read("front-proxy-client.crt")?, read("front-proxy-client.key")?);
    let path = format!(
        "/apis/sched.kubectl-sched.io/v1alpha1/namespaces/{}/podexplanations/while-down",
        lab.ns
    );
    let answer = as_front_proxy(explainer, (&proxy_cert, &proxy_key), &path).await?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    ensure!(
        answer.starts_with("HTTP/1.1 200"),
        "ready, but the pod created while the explainer was down is not explained: {answer}"
    );
    let body: Value = serde_json::from_str(body).with_context(|| format!("the answer: {answer}"))?;
    ensure!(
        carries_its_age(&body)?,
        "ready, but the answer is not in sync: {body}"
    );
    let rv: u64 = body["snapshot"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    ensure!(
        rv >= rv_of(&meanwhile),
        "ready at resourceVersion {rv}, before the pod created while down ({})",
        rv_of(&meanwhile)
    );
    until_explained(lab.cp, &lab.ns, "while-down", true).await?;
    until_explained(lab.cp, &lab.ns, "before", false).await?;
    eprintln!(
        "the explainer restarted → ready and answering through the API server in {:.2} s",
        restarted.elapsed().as_secs_f64()
    );
    Ok(())
}
