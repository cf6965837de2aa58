//! The explainer's pending-reason metrics against real Prometheus binaries (Debian's 2.42, `make
//! prometheus`):
//!
//! - `promtool test rules` on the alerts of deploy/explainer/monitoring/prometheusrule.yaml (its
//!   `spec` written into a plain rules file, as a Prometheus without the Operator loads it), with
//!   tests/prometheus/pending-rules.test.yaml: the alert fires for pods pending 10 minutes on one
//!   reason, not for 9 minutes, not for pods that scheduled after 5, not when the reason changed;
//! - a real Prometheus on 127.0.0.1 scrapes an explainer's `/metrics` and answers, through its HTTP
//!   query API, the pending reasons of a scenario with three causes (Insufficient cpu, an untolerated
//!   taint, a node selector no node matches), each under its workload, with its pod count.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::common::{Lab, PodBuilder, pod};
use super::{START, control_plane, free_port};
use e2e::fixtures::eventually;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where tests/prometheus/install.sh puts Debian's Prometheus.
fn prometheus_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBECTL_SCHED_PROMETHEUS_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
    cache.join("kubectl-sched/prometheus-2.42")
}

/// The path of `tool` (prometheus, promtool); an error naming the install command when it is missing.
fn prometheus_tool(tool: &str) -> Result<PathBuf> {
    let path = prometheus_dir().join("usr/bin").join(tool);
    ensure!(
        path.is_file(),
        "{} is missing: run `make prometheus` (tests/prometheus/install.sh: Debian's prometheus 2.42, \
         fetched with apt-get download and unpacked into the cache)",
        path.display()
    );
    Ok(path)
}

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The PrometheusRule's `spec` (its `groups`) as a plain rules file in `dir`, as promtool and a
/// Prometheus without the Operator read it.
fn write_rules_file(dir: &Path) -> Result<PathBuf> {
    let source = repository().join("deploy/explainer/monitoring/prometheusrule.yaml");
    let text = std::fs::read_to_string(&source).with_context(|| format!("reading {}", source.display()))?;
    let rule: yaml_serde::Value =
        yaml_serde::from_str(&text).with_context(|| format!("parsing {}", source.display()))?;
    let spec = rule
        .get("spec")
        .with_context(|| format!("{} has no spec", source.display()))?;
    let path = dir.join("pending-rules.yaml");
    std::fs::write(&path, yaml_serde::to_string(spec)?)?;
    Ok(path)
}

fn run_promtool(args: &[&str], dir: &Path) -> Result<String> {
    let out = Process::new(prometheus_tool("promtool")?)
        .args(args)
        .current_dir(dir)
        .output()
        .context("running promtool")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "promtool {}: {}\n{text}",
        args.join(" "),
        out.status
    );
    Ok(text)
}

#[test]
fn promtool_fires_the_pending_alert_after_ten_minutes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    write_rules_file(dir.path())?;
    std::fs::copy(
        repository().join("tests/prometheus/pending-rules.test.yaml"),
        dir.path().join("pending-rules.test.yaml"),
    )?;
    let checked = run_promtool(&["check", "rules", "pending-rules.yaml"], dir.path())?;
    ensure!(checked.contains("SUCCESS: 4 rules found"), "{checked}");
    let tested = run_promtool(&["test", "rules", "pending-rules.test.yaml"], dir.path())?;
    ensure!(tested.contains("SUCCESS"), "{tested}");
    Ok(())
}

/// A Prometheus process, killed when dropped, with its log.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus on 127.0.0.1, scraping `target` (`127.0.0.1:PORT`) every second.
    fn start(target: &str) -> Result<Self> {
        let binary = prometheus_tool("prometheus")?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
                 - job_name: sched-explainer\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )?;
        let port = free_port()?;
        let log = dir.path().join("prometheus.log");
        let child = Process::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting prometheus")?;
        Ok(Prometheus {
            child,
            port,
            log,
            _dir: dir,
        })
    }

    /// The end of its log, for a failure's message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// `GET /api/v1/query?query=QUERY`: the result vector, or None while Prometheus does not answer.
    async fn query(&self, query: &str) -> Result<Option<Vec<Value>>> {
        let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await else {
            return Ok(None);
        };
        let request = format!(
            "GET /api/v1/query?query={} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
            percent_encode(query)
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        tokio::time::timeout(super::FRESHNESS, stream.read_to_end(&mut response))
            .await
            .context("Prometheus's answer")??;
        let text = String::from_utf8_lossy(&response);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return Ok(None);
        };
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            // Starting up (503), or the query is wrong (400: the body says why).
            if head.contains(" 400 ") {
                bail!("Prometheus refused {query:?}: {body}");
            }
            return Ok(None);
        }
        let answer: Value = serde_json::from_str(body)?;
        Ok(answer["data"]["result"].as_array().cloned())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A URL query value: everything but unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Starts an explainer of its own (not registered as an APIService: only its admin port is read):
/// its admin port, and the handle that stops it when dropped.
fn start_metrics_explainer(cp: &'static e2e::ControlPlane) -> Result<(u16, super::Running)> {
    let dir = cp.dir().join("pending-explainer");
    let command = super::explainer_command(cp, &dir, &["localhost".to_string()])?;
    Ok((command.admin_port, super::run_explainer(&command.argv)?))
}

/// Creates `count` pods of the Deployment `deployment` (owned by its ReplicaSet `NAME-HASH` and
/// labelled with HASH, as the Deployment controller makes them; no controller runs here).
async fn create_replicas(
    lab: &Lab,
    deployment: &str,
    count: usize,
    shape: impl Fn(&str) -> PodBuilder,
) -> Result<()> {
    let hash = "5d4f8";
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &lab.ns);
    for i in 0..count {
        let name = format!("{deployment}-{hash}-{i}");
        let mut p = shape(&name).label("pod-template-hash", hash).build()?;
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("{deployment}-{hash}"),
            uid: format!("uid-{deployment}-{hash}"),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        pods.create(&PostParams::default(), &p)
            .await
            .with_context(|| format!("creating pod {name}"))?;
    }
    Ok(())
}

/// `(workload, plugin, reason, pods)` of each series a query returned.
fn unschedulable_series(result: &[Value]) -> Vec<(String, String, String, String)> {
    let mut rows: Vec<(String, String, String, String)> = result
        .iter()
        .map(|s| {
            let m = &s["metric"];
            let text = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (
                format!("{}/{}", text("workload_kind"), text("workload")),
                text("plugin"),
                text("reason"),
                s["value"][1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn prometheus_scrapes_the_pending_reasons_of_three_causes() -> Result<()> {
    let lab = Lab::begin_on("pending-metrics", control_plane).await?;
    let (admin_port, _explainer) = start_metrics_explainer(lab.cp)?;
    lab.create_nodes([
        lab.node("plain", "4", "8Gi"),
        // Two tainted nodes: the taint is the only blocker on more nodes than the node selector (on
        // the plain one), so triage names it the gpu pods' root cause.
        lab.node("gpu-1", "4", "8Gi")
            .label("pool", "gpu")
            .taint("dedicated", "gpu", "NoSchedule"),
        lab.node("gpu-2", "4", "8Gi")
            .label("pool", "gpu")
            .taint("dedicated", "gpu", "NoSchedule"),
    ])
    .await?;
    // Three causes: more cpu than any node has; the gpu pool's taint, not tolerated; a node selector
    // no node matches.
    create_replicas(&lab, "trainer", 3, |n| pod(n).cpu("64")).await?;
    create_replicas(&lab, "gpu-job", 2, |n| {
        pod(n).cpu("100m").spec("nodeSelector", json!({"pool": "gpu"}))
    })
    .await?;
    create_replicas(&lab, "web", 1, |n| {
        pod(n).cpu("100m").spec("nodeSelector", json!({"disk": "ssd"}))
    })
    .await?;
    let created = Instant::now();

    let prometheus = Prometheus::start(&format!("127.0.0.1:{admin_port}"))?;
    let ns = &lab.ns;
    let by_series = format!("sched_pending_unschedulable_pods{{namespace=\"{ns}\"}}");
    let want = vec![
        (
            "deployment/gpu-job".to_string(),
            "TaintToleration".to_string(),
            "node(s) had untolerated taint(s)".to_string(),
            "2".to_string(),
        ),
        (
            "deployment/trainer".to_string(),
            "NodeResourcesFit".to_string(),
            "Insufficient cpu".to_string(),
            "3".to_string(),
        ),
        (
            "deployment/web".to_string(),
            "NodeAffinity".to_string(),
            "node(s) didn't match Pod's node affinity/selector".to_string(),
            "1".to_string(),
        ),
    ];
    let last = std::sync::Mutex::new(Vec::new());
    let found = eventually(
        "Prometheus to return the three pending reasons",
        START,
        || async {
            let Some(result) = prometheus.query(&by_series).await? else {
                return Ok(None);
            };
            let rows = unschedulable_series(&result);
            let done = rows == want;
            *last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = rows;
            Ok(done.then_some(()))
        },
    )
    .await;
    if let Err(e) = found {
        bail!(
            "{e}; last answer {:?}, want {want:?}\nPrometheus's log:\n{}",
            last.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            prometheus.log_tail()
        );
    }
    eprintln!(
        "pods created → their reasons in Prometheus in {:.1} s",
        created.elapsed().as_secs_f64()
    );

    // The same answers summed by reason, the ages, the verdicts, and the pods nobody tried (no
    // kube-scheduler runs here: every pending pod is untried).
    let queries = [
        format!("sum by (reason) (sched_pending_unschedulable_pods{{namespace=\"{ns}\"}})"),
        format!("sched_pending_unschedulable_oldest_seconds{{namespace=\"{ns}\"}} >= 0"),
        format!("sched_pending_pods{{namespace=\"{ns}\"}}"),
        format!("sched_pending_not_tried_pods{{namespace=\"{ns}\"}}"),
    ];
    let mut answers = Vec::new();
    for q in &queries {
        let result = prometheus
            .query(q)
            .await?
            .with_context(|| format!("Prometheus did not answer {q:?}"))?;
        eprintln!("{q}\n  → {}", serde_json::to_string(&result)?);
        answers.push(result);
    }
    let by_reason: Vec<(String, String)> = {
        let mut rows: Vec<(String, String)> = answers[0]
            .iter()
            .map(|s| {
                (
                    s["metric"]["reason"].as_str().unwrap_or_default().to_string(),
                    s["value"][1].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    ensure!(
        by_reason
            == [
                ("Insufficient cpu".to_string(), "3".to_string()),
                (
                    "node(s) didn't match Pod's node affinity/selector".to_string(),
                    "1".to_string()
                ),
                ("node(s) had untolerated taint(s)".to_string(), "2".to_string()),
            ],
        "by reason: {by_reason:?}"
    );
    ensure!(answers[1].len() == 3, "an age per series: {:?}", answers[1]);
    let verdicts: Vec<(String, String)> = answers[2]
        .iter()
        .map(|s| {
            (
                s["metric"]["verdict"].as_str().unwrap_or_default().to_string(),
                s["value"][1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    ensure!(
        verdicts == [("unschedulable".to_string(), "6".to_string())],
        "verdicts: {verdicts:?}"
    );
    let not_tried: Vec<&str> = answers[3].iter().filter_map(|s| s["value"][1].as_str()).collect();
    ensure!(not_tried == ["6"], "not tried: {not_tried:?}");
    Ok(())
}
