//! kubectl's conventions, checked against the real kube-apiserver (RBAC on) and the pinned kubectl:
//!
//! - `--as`/`--as-group` make `kubectl sched explain POD` behave as `kubectl get pod POD` does with the
//!   same rights: both refused without them (ours in one line naming the missing permission and the
//!   role of deploy/rbac/ that grants it), both answered once a binding grants them;
//! - `--server`, `--token`, `--certificate-authority`, `--insecure-skip-tls-verify`, `--cluster` and
//!   `--user` replace the kubeconfig's choices as kubectl's do (kubectl itself run the same way is the
//!   reference);
//! - `snapshot -o yaml|json` is the format and `--output-file` the file (`-o yaml` no longer writes a
//!   file named `yaml`).
//!
//! One control plane without kube-scheduler: the pods stay pending as created.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use common::{Lab, RBAC_TIMEOUT, apiserver_only, kubectl_sched_binary, pod, show};
use e2e::ControlPlane;
use serde_json::{Value, json};

/// Bounds one command (kubectl or kubectl-sched).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `program` with `args` in `home` (an empty HOME: no ~/.kube/config, no $KUBECONFIG), so that only
/// the flags given choose the cluster and the credentials.
async fn run_in(program: &Path, home: &Path, args: &[&str]) -> Result<Output> {
    tokio::time::timeout(
        COMMAND_TIMEOUT,
        tokio::process::Command::new(program)
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", home)
            .current_dir(home)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("{} {} took too long", program.display(), args.join(" ")))?
    .with_context(|| format!("running {}", program.display()))
}

/// Both tools, side by side, with the same flags.
struct Pair<'a> {
    kubectl: PathBuf,
    sched: PathBuf,
    home: &'a Path,
}

impl Pair<'_> {
    /// `kubectl get pod POD -n NS FLAGS` and `kubectl-sched explain POD -n NS -o json FLAGS`.
    async fn get_and_explain(&self, pod: &str, ns: &str, flags: &[&str]) -> Result<(Output, Output)> {
        let mut get = vec!["get", "pod", pod, "-n", ns, "-o", "name"];
        get.extend(flags);
        let mut explain = vec!["explain", pod, "-n", ns, "-o", "json"];
        explain.extend(flags);
        Ok((
            run_in(&self.kubectl, self.home, &get).await?,
            run_in(&self.sched, self.home, &explain).await?,
        ))
    }

    /// [`Self::get_and_explain`] until both succeed or [`RBAC_TIMEOUT`] passes.
    async fn once_allowed(&self, pod: &str, ns: &str, flags: &[&str]) -> Result<(Output, Output)> {
        let deadline = std::time::Instant::now() + RBAC_TIMEOUT;
        loop {
            let (get, explain) = self.get_and_explain(pod, ns, flags).await?;
            let both = get.status.success() && explain.status.success();
            if both || std::time::Instant::now() >= deadline {
                return Ok((get, explain));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Both refused; ours in one line that names what `want` says (the user and the missing
/// permission) and the role that grants it.
fn both_refused(get: &Output, explain: &Output, user: &str) -> Result<()> {
    ensure!(
        !get.status.success() && String::from_utf8_lossy(&get.stderr).contains("Forbidden"),
        "kubectl get was not refused for {user}: {}",
        show(get)
    );
    let stderr = String::from_utf8_lossy(&explain.stderr);
    let denied = format!("User \"{user}\" cannot list resource");
    ensure!(
        explain.status.code() == Some(1)
            && stderr.lines().count() == 1
            && stderr.contains(&denied)
            && stderr.contains("missing permission: list ")
            && stderr.contains("the ClusterRole kubectl-sched-reader grants it")
            && stderr.contains("deploy/rbac/kubectl-sched-reader.yaml"),
        "explain as {user} was not refused in one line naming the permission and its role: {}",
        show(explain)
    );
    Ok(())
}

/// Both answered, about the same pod.
fn both_answer(get: &Output, explain: &Output, ns: &str, pod: &str) -> Result<()> {
    ensure!(
        get.status.success() && String::from_utf8_lossy(&get.stdout).trim() == format!("pod/{pod}"),
        "kubectl get: {}",
        show(get)
    );
    let report: Value = serde_json::from_slice(&explain.stdout).with_context(|| show(explain))?;
    ensure!(
        explain.status.success() && report["pod"] == json!(format!("{ns}/{pod}")),
        "explain: {}",
        show(explain)
    );
    Ok(())
}

fn reader_manifest() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/rbac/kubectl-sched-reader.yaml")
        .display()
        .to_string()
}

#[tokio::test]
async fn impersonation_behaves_as_kubectl_get_with_the_same_rights() -> Result<()> {
    let binary = kubectl_sched_binary().await?;
    let lab = Lab::begin_on("conv-as", apiserver_only).await?;
    let cp = lab.cp;
    let ns = lab.ns.clone();
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("p").cpu("1")]).await?;
    let home = tempfile::tempdir()?;
    let pair = Pair {
        kubectl: cp.bin_dir().join("kubectl"),
        sched: binary,
        home: home.path(),
    };
    let admin = cp.kubeconfig_path().display().to_string();
    cp.kubectl(&["apply", "--server-side", "-f", &reader_manifest()])
        .await?;

    // A user without rights: both refused.
    let bob = format!("bob-{ns}");
    let as_bob = ["--kubeconfig", &admin, "--as", &bob];
    let (get, explain) = pair.get_and_explain("p", &ns, &as_bob).await?;
    both_refused(&get, &explain, &bob)?;
    // Granted the reader role: both answer.
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-bob"),
        "--clusterrole=kubectl-sched-reader",
        &format!("--user={bob}"),
    ])
    .await?;
    let (get, explain) = pair.once_allowed("p", &ns, &as_bob).await?;
    both_answer(&get, &explain, &ns, "p")?;

    // The rights of a group (--as-group, repeatable): refused as the user alone, answered with the group.
    let carol = format!("carol-{ns}");
    let group = format!("readers-{ns}");
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-readers"),
        "--clusterrole=kubectl-sched-reader",
        &format!("--group={group}"),
    ])
    .await?;
    let as_carol = ["--kubeconfig", &admin, "--as", &carol];
    let (get, explain) = pair.get_and_explain("p", &ns, &as_carol).await?;
    both_refused(&get, &explain, &carol)?;
    let with_group = [
        "--kubeconfig",
        &admin,
        "--as",
        &carol,
        "--as-group",
        "other",
        "--as-group",
        &group,
    ];
    let (get, explain) = pair.once_allowed("p", &ns, &with_group).await?;
    both_answer(&get, &explain, &ns, "p")?;
    Ok(())
}

/// A ServiceAccount bound to the reader role, and its token.
async fn reader_token(lab: &Lab, name: &str) -> Result<String> {
    let cp = lab.cp;
    cp.kubectl(&["apply", "--server-side", "-f", &reader_manifest()])
        .await?;
    cp.kubectl(&["create", "serviceaccount", name, "-n", &lab.ns])
        .await?;
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("{}-{name}", lab.ns),
        "--clusterrole=kubectl-sched-reader",
        &format!("--serviceaccount={}:{name}", lab.ns),
    ])
    .await?;
    let token = cp
        .kubectl(&["create", "token", name, "-n", &lab.ns, "--duration=1h"])
        .await?;
    Ok(token.trim().to_string())
}

/// The admin kubeconfig's files: the cluster's CA, the admin's client certificate and key.
fn admin_files(cp: &ControlPlane) -> Result<(String, String, String)> {
    let config: Value = yaml_serde::from_slice(&std::fs::read(cp.kubeconfig_path())?)?;
    let text = |value: &Value| {
        value
            .as_str()
            .map(str::to_string)
            .context("a file path in the kubeconfig")
    };
    Ok((
        text(&config["clusters"][0]["cluster"]["certificate-authority"])?,
        text(&config["users"][0]["user"]["client-certificate"])?,
        text(&config["users"][0]["user"]["client-key"])?,
    ))
}

#[tokio::test]
async fn connection_flags_replace_the_kubeconfigs_choices_as_kubectls_do() -> Result<()> {
    let binary = kubectl_sched_binary().await?;
    let lab = Lab::begin_on("conv-flags", apiserver_only).await?;
    let cp = lab.cp;
    let ns = lab.ns.clone();
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("p").cpu("1")]).await?;
    let token = reader_token(&lab, "flags").await?;
    let home = tempfile::tempdir()?;
    let (ca, cert, key) = admin_files(cp)?;
    let pair = Pair {
        kubectl: cp.bin_dir().join("kubectl"),
        sched: binary,
        home: home.path(),
    };
    let server = cp.server_url().to_string();

    // No kubeconfig at all: --server, --token and the CA (or no verification) are enough.
    for flags in [
        vec![
            "--server",
            &server,
            "--token",
            &token,
            "--certificate-authority",
            &ca,
        ],
        vec!["-s", &server, "--token", &token, "--insecure-skip-tls-verify"],
        vec![
            "--server",
            &server,
            "--certificate-authority",
            &ca,
            "--client-certificate",
            &cert,
            "--client-key",
            &key,
        ],
    ] {
        let (get, explain) = pair.once_allowed("p", &ns, &flags).await?;
        both_answer(&get, &explain, &ns, "p").with_context(|| format!("{flags:?}"))?;
    }

    // A kubeconfig whose current context points at nothing useful: --cluster and --user pick others.
    let kubeconfig = home.path().join("config");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "broken",
        "contexts": [{"name": "broken", "context": {"cluster": "nowhere", "user": "nobody"}}],
        "clusters": [
            {"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true}},
            {"name": "real", "cluster": {"server": server, "certificate-authority": ca}},
        ],
        "users": [
            {"name": "nobody", "user": {"token": "not-a-token"}},
            {"name": "reader", "user": {"token": token}},
        ],
    });
    std::fs::write(&kubeconfig, serde_json::to_vec_pretty(&config)?)?;
    let kubeconfig = kubeconfig.display().to_string();
    let flags = [
        "--kubeconfig",
        &kubeconfig,
        "--cluster",
        "real",
        "--user",
        "reader",
    ];
    let (get, explain) = pair.once_allowed("p", &ns, &flags).await?;
    both_answer(&get, &explain, &ns, "p")?;
    // The kubeconfig's user with --token over it: the token wins, for both.
    let flags = [
        "--kubeconfig",
        &kubeconfig,
        "--cluster",
        "real",
        "--token",
        &token,
    ];
    let (get, explain) = pair.once_allowed("p", &ns, &flags).await?;
    both_answer(&get, &explain, &ns, "p")?;

    // A CA that did not sign the server's certificate: both refuse to talk to it.
    let wrong_ca = home.path().join("wrong-ca.crt");
    let other = rcgen::generate_simple_self_signed(vec!["elsewhere".to_string()])?;
    std::fs::write(&wrong_ca, other.cert.pem())?;
    let wrong_ca = wrong_ca.display().to_string();
    let flags = [
        "--server",
        &server,
        "--token",
        &token,
        "--certificate-authority",
        &wrong_ca,
    ];
    let (get, explain) = pair.get_and_explain("p", &ns, &flags).await?;
    ensure!(
        !get.status.success() && explain.status.code() == Some(1),
        "a server certificate the CA did not sign was accepted:\n{}\n{}",
        show(&get),
        show(&explain)
    );
    Ok(())
}

#[tokio::test]
async fn snapshot_o_is_the_format_and_output_file_the_file() -> Result<()> {
    let binary = kubectl_sched_binary().await?;
    let lab = Lab::begin_on("conv-snap", apiserver_only).await?;
    let cp = lab.cp;
    lab.create_nodes([lab.node("n1", "2", "4Gi")]).await?;
    lab.create_pods([pod("p").cpu("1")]).await?;
    let dir = tempfile::tempdir()?;
    let admin = cp.kubeconfig_path().display().to_string();
    let snapshot = |args: &[&str]| {
        let mut all = vec!["snapshot", "-A", "--kubeconfig", &admin];
        all.extend(args);
        let all: Vec<String> = all.into_iter().map(str::to_string).collect();
        let binary = binary.clone();
        let dir = dir.path().to_path_buf();
        async move {
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            run_in(&binary, &dir, &refs).await
        }
    };

    // -o yaml: YAML on stdout, and no file named "yaml".
    let output = snapshot(&["-o", "yaml"]).await?;
    let text = show(&output);
    ensure!(output.status.success(), "snapshot -A -o yaml: {text}");
    let list: Value = yaml_serde::from_slice(&output.stdout).with_context(|| text.clone())?;
    ensure!(list["kind"] == "List", "not a List on stdout: {text}");
    ensure!(
        !dir.path().join("yaml").exists(),
        "snapshot -o yaml wrote a file named yaml"
    );
    // -o json --output-file: JSON in that file, nothing on stdout.
    let output = snapshot(&["-o", "json", "--output-file", "snap.out"]).await?;
    let text = show(&output);
    ensure!(output.status.success() && output.stdout.is_empty(), "{text}");
    let list: Value = serde_json::from_slice(&std::fs::read(dir.path().join("snap.out"))?)
        .with_context(|| format!("snap.out is not JSON: {text}"))?;
    ensure!(list["kind"] == "List", "snap.out: {text}");
    // An old invocation that can only mean a file still writes it, and says what to use instead.
    let output = snapshot(&["-o", "old.json"]).await?;
    let text = show(&output);
    ensure!(
        output.status.success()
            && String::from_utf8_lossy(&output.stderr).contains("--output-file")
            && serde_json::from_slice::<Value>(&std::fs::read(dir.path().join("old.json"))?).is_ok(),
        "snapshot -o old.json: {text}"
    );
    // A format snapshot does not have: kubectl's words, and no listing done.
    let output = snapshot(&["-o", "wide"]).await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.code() == Some(1)
            && stderr.contains(
                "unable to match a printer suitable for the output format \"wide\", allowed formats are: json,yaml"
            ),
        "snapshot -o wide: {}",
        show(&output)
    );
    Ok(())
}
