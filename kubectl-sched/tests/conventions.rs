//! kubectl's conventions, on the built binary without a cluster (tests/tests/kubectl_conventions.rs
//! checks them against the real API server): `-o name` and `-o jsonpath=...` where kubectl has them, `-o`
//! errors in kubectl's words, kubectl's connection flags accepted after the plugin name, and
//! `--request-timeout` as one bound on the whole exchange with an API server that never answers.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::run;
use serde_json::Value;

fn example() -> String {
    common::example().display().to_string()
}

fn drill_fixture() -> String {
    common::drill_fixture().display().to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// stdout of a run that answered: exit 0, or 3 for "some pods cannot be scheduled" (triage, simulate).
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{args:?}: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// The commands with kubectl's printers, each on a file it can evaluate.
fn commands() -> Vec<Vec<String>> {
    let (example, drill) = (example(), drill_fixture());
    [
        vec!["explain", "report-builder", "-n", "shop", "--from", &example],
        vec!["triage", "-n", "shop", "--from", &example],
        vec!["simulate", "-n", "shop", "--from", &example],
        vec!["preempt", "urgent", "-n", "drill", "--from", &drill],
    ]
    .into_iter()
    .map(|args| args.into_iter().map(str::to_string).collect())
    .collect()
}

fn with(command: &[String], more: &[&str]) -> Vec<String> {
    command
        .iter()
        .cloned()
        .chain(more.iter().map(|s| s.to_string()))
        .collect()
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn unknown_output_formats_are_refused_in_kubectls_words() {
    for (command, allowed) in commands().iter().zip([
        "json,jsonpath,jsonpath-as-json,jsonpath-file,markdown,name,table,wide,yaml",
        "json,jsonpath,jsonpath-as-json,jsonpath-file,name,table,wide,yaml",
        "json,jsonpath,jsonpath-as-json,jsonpath-file,name,table,wide,yaml",
        "json,jsonpath,jsonpath-as-json,jsonpath-file,name,table,yaml",
    ]) {
        let args = with(command, &["-o", "xml"]);
        let o = run(&refs(&args));
        let stderr = text(&o.stderr);
        let want = format!(
            "error: unable to match a printer suitable for the output format \"xml\", allowed formats are: {allowed}"
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&want), "{args:?}: {stderr}");
        // A jsonpath without a template is refused as kubectl refuses it.
        let args = with(command, &["-o", "jsonpath="]);
        let o = run(&refs(&args));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            text(&o.stderr).contains("no template given"),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn o_name_prints_kubectls_pod_lines_for_the_pods_concerned() {
    let [explain, triage, simulate, preempt] = commands().try_into().expect("four commands");
    // explain: the pod explained.
    assert_eq!(
        ok(&refs(&with(&explain, &["-o", "name"]))),
        "pod/report-builder\n"
    );
    // preempt: its victims, as -o json lists them.
    let drill: Value = serde_json::from_str(&ok(&refs(&with(&preempt, &["-o", "json"])))).expect("JSON");
    let victims: String = drill["victims"]
        .as_array()
        .expect("victims")
        .iter()
        .map(|v| format!("pod/{}\n", v["name"].as_str().expect("a name")))
        .collect();
    assert!(!victims.is_empty(), "the drill has victims");
    assert_eq!(ok(&refs(&with(&preempt, &["-o", "name"]))), victims);
    // triage: every pending pod it triaged; simulate: the pods it placed or left pending.
    for (command, pointer) in [(triage, "/causes"), (simulate, "/pods")] {
        let names = ok(&refs(&with(&command, &["-o", "name"])));
        assert!(!names.is_empty(), "{command:?}");
        for line in names.lines() {
            let name = line
                .strip_prefix("pod/")
                .unwrap_or_else(|| panic!("{command:?}: {line}"));
            assert!(!name.contains('/') && !name.is_empty(), "{command:?}: {line}");
        }
        let document = ok(&refs(&with(&command, &["-o", "json"])));
        let doc: Value = serde_json::from_str(&document).expect("JSON");
        let listed = doc.pointer(pointer).expect("the list").to_string();
        for line in names.lines() {
            let name = &line["pod/".len()..];
            // `namespace/name` (simulate) or the name alone (triage, whose workloads carry the namespace).
            let (qualified, bare) = (format!("/{name}\""), format!("\"{name}\""));
            assert!(
                listed.contains(&qualified) || listed.contains(&bare),
                "{command:?}: {name} is not in {pointer}"
            );
        }
    }
    // A pending pod of the example that triage files and simulate leaves pending.
    let [_, triage, simulate, _] = commands().try_into().expect("four commands");
    for command in [triage, simulate] {
        let names = ok(&refs(&with(&command, &["-o", "name"])));
        assert!(
            names.lines().any(|l| l == "pod/report-builder"),
            "{command:?}: {names}"
        );
    }
}

#[test]
fn jsonpath_templates_read_the_json_document() {
    for command in commands() {
        let doc: Value = serde_json::from_str(&ok(&refs(&with(&command, &["-o", "json"])))).expect("JSON");
        // The first key of the document, and a field the template reads from it.
        let (key, value) = doc
            .as_object()
            .and_then(|o| o.iter().find(|(_, v)| v.is_string()))
            .expect("a string field");
        let want = value.as_str().expect("a string");
        let template = format!("jsonpath={{.{key}}}");
        assert_eq!(
            ok(&refs(&with(&command, &["-o", &template]))),
            want,
            "{command:?}"
        );
        let template = format!("jsonpath=key {key}: {{.{key}}}{{\"\\n\"}}");
        assert_eq!(
            ok(&refs(&with(&command, &["-o", &template]))),
            format!("key {key}: {want}\n"),
            "{command:?}"
        );
        let template = format!("jsonpath-as-json={{.{key}}}");
        let as_json: Value =
            serde_json::from_str(&ok(&refs(&with(&command, &["-o", &template])))).expect("JSON");
        assert_eq!(as_json, Value::Array(vec![value.clone()]), "{command:?}");
    }
    // A template from a file, with range over a list.
    let dir = tempfile::tempdir().expect("tempdir");
    let template = dir.path().join("nodes.tmpl");
    std::fs::write(&template, "{range .nodes[*]}{.name}{\"\\n\"}{end}").expect("writing the template");
    let explain = commands().swap_remove(0);
    let doc: Value = serde_json::from_str(&ok(&refs(&with(&explain, &["-o", "json"])))).expect("JSON");
    let nodes: String = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| format!("{}\n", n["name"].as_str().expect("a node name")))
        .collect();
    assert!(nodes.lines().count() == 5, "the example has 5 nodes: {nodes}");
    let flag = format!("jsonpath-file={}", template.display());
    assert_eq!(ok(&refs(&with(&explain, &["-o", &flag]))), nodes);
    // A malformed template, or a template file that is not there: one line, exit 1.
    for bad in [
        "jsonpath={.nodes[}",
        "jsonpath={range .nodes[*]}{.name}",
        "jsonpath-file=/nonexistent/t",
    ] {
        let o = run(&refs(&with(&explain, &["-o", bad])));
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{bad}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.lines().count() == 1,
            "{bad}: {stderr}"
        );
    }
}

#[test]
fn kubectls_connection_flags_are_taken_after_the_plugin_name() {
    // With a snapshot file they are accepted and not needed.
    for flags in [
        &[
            "--as",
            "bob",
            "--as-group",
            "a",
            "--as-group",
            "b",
            "--as-uid",
            "1",
        ][..],
        &[
            "--server",
            "https://127.0.0.1:1",
            "--token",
            "t",
            "--insecure-skip-tls-verify",
        ],
        &[
            "-s",
            "https://127.0.0.1:1",
            "--user",
            "u",
            "--cluster",
            "c",
            "--tls-server-name",
            "api",
        ],
        &[
            "--certificate-authority",
            "ca.crt",
            "--client-certificate",
            "c.crt",
            "--client-key",
            "c.key",
        ],
        &[
            "--username",
            "u",
            "--password",
            "p",
            "--as",
            "bob",
            "--as-user-extra",
            "k=v",
        ],
    ] {
        let explain = commands().swap_remove(0);
        ok(&refs(&with(&explain, flags)));
    }
    // Without one, --server is where the command goes: the error names it.
    let o = run(&[
        "explain",
        "p",
        "--server",
        "https://127.0.0.1:1",
        "--token",
        "t",
        "--request-timeout",
        "5s",
    ]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("https://127.0.0.1:1"), "{stderr}");
    // Impersonating a group without a user is refused, as kubectl refuses it.
    let o = run(&[
        "explain",
        "p",
        "--server",
        "https://127.0.0.1:1",
        "--as-group",
        "g",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("name the user with --as"),
        "{}",
        text(&o.stderr)
    );
}

/// A loopback port that accepts connections and never answers: no API server, nothing sent back.
fn silent_port() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let keeper = std::thread::spawn(move || {
        let mut held = Vec::new();
        // Accepts (and holds) what comes for a while, reads and drops nothing: no answer, no reset.
        listener.set_nonblocking(true).expect("non-blocking");
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(1)));
                    let _ = stream.read(&mut [0u8; 1]);
                    held.push(stream);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (port, keeper)
}

#[test]
fn request_timeout_bounds_the_whole_exchange() {
    let (port, _keeper) = silent_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("config");
    let config = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: silent\ncontexts:\n- name: silent\n  context: {{cluster: silent, \
         user: u}}\nclusters:\n- name: silent\n  cluster: {{server: 'https://127.0.0.1:{port}', \
         insecure-skip-tls-verify: true}}\nusers:\n- name: u\n  user: {{token: t}}\n"
    );
    std::fs::write(&kubeconfig, config).expect("writing the kubeconfig");
    let kubeconfig = kubeconfig.display().to_string();
    let bound = Duration::from_secs(2);
    for command in [&["explain", "p"][..], &["triage"], &["snapshot", "-A"]] {
        let mut args = command.to_vec();
        args.extend(["--kubeconfig", &kubeconfig, "--request-timeout", "2s"]);
        let started = Instant::now();
        let o = run(&args);
        let took = started.elapsed();
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("timed out after 2s without an answer") && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
        // The bound, and a margin for starting the process and printing.
        assert!(
            took < bound + Duration::from_millis(1500),
            "{args:?} took {took:?} with --request-timeout 2s"
        );
    }
}
