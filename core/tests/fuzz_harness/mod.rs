//! What sched-core's fuzz targets run on one input, with their invariants (a broken invariant panics,
//! which libFuzzer reports as a crash). Shared by the targets in `fuzz/fuzz_targets/` (through
//! `#[path]`) and by `tests/fuzz_corpus.rs`, which replays the committed corpora on stable: one
//! function per target, so the replay checks exactly what the fuzzer checked.
//!
//! Inputs are arbitrary bytes; text inputs are read as lossy UTF-8 where the entry point takes `&str`.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use sched_core::engine::{Engine, SchedulerConfig, in_tree_registry, schedule};
use sched_core::labels::{Labels, NodeSelectorMatcher, Requirement, Selector};
use sched_core::resource::{parse_milli_value, parse_value};
use sched_core::snapshot::load::{ListSplitter, load_bytes, write_list_json};
use sched_core::{ClusterObjects, PodInfo, Snapshot};

/// Runs target `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "snapshot_load" => snapshot_load(data),
        "scheduler_config" => scheduler_config(data),
        "quantity" => quantity(data),
        "label_selector" => label_selector(data),
        "list_split" => list_split(data),
        other => panic!("no fuzz target {other:?}"),
    }
}

/// Snapshot bytes (JSON or YAML) → ClusterObjects → Snapshot → a scheduling cycle for the first pods.
/// Invariants: no panic; what loads builds a snapshot and schedules its pods; written back as a JSON
/// `kind: List` it loads again to the same number of objects of each kind (the loader reads what the
/// writer writes).
pub fn snapshot_load(data: &[u8]) {
    let Ok((objects, _report)) = load_bytes(data, Path::new("fuzz-input")) else {
        return;
    };
    let counts = kind_counts(&objects);
    let mut written = Vec::new();
    write_list_json(&objects, &mut written).expect("loaded objects serialize as JSON");
    let (reloaded, _) = load_bytes(&written, Path::new("fuzz-rewritten"))
        .unwrap_or_else(|e| panic!("the JSON written from a loaded snapshot does not load: {e}"));
    assert_eq!(
        kind_counts(&reloaded),
        counts,
        "objects lost or gained writing a loaded snapshot back"
    );
    let pods: Vec<Pod> = objects.pods.iter().take(MAX_PODS_SCHEDULED).cloned().collect();
    let snapshot = Arc::new(Snapshot::new(objects));
    // The default engine is the same for every input: built once, so each execution spends its
    // time on the input rather than on building the registry and default profile again.
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    let engine = ENGINE.get_or_init(Engine::default);
    for pod in pods {
        if let Ok(fwk) = engine.framework_for(&pod, snapshot.clone()) {
            let _ = schedule(&fwk, &PodInfo::new(pod), engine.schedule_options(false));
        }
    }
}

/// Pods of a loaded snapshot run through a scheduling cycle (each cycle visits every node).
const MAX_PODS_SCHEDULED: usize = 2;

fn kind_counts(objects: &ClusterObjects) -> Vec<usize> {
    vec![
        objects.nodes.len(),
        objects.pods.len(),
        objects.namespaces.len(),
        objects.persistent_volumes.len(),
        objects.persistent_volume_claims.len(),
        objects.storage_classes.len(),
        objects.csi_nodes.len(),
        objects.csi_drivers.len(),
        objects.csi_storage_capacities.len(),
        objects.pod_disruption_budgets.len(),
        objects.priority_classes.len(),
        objects.services.len(),
        objects.replication_controllers.len(),
        objects.replica_sets.len(),
        objects.stateful_sets.len(),
        objects.resource_claims.len(),
        objects.device_classes.len(),
        objects.resource_slices.len(),
        objects.resource_claim_templates.len(),
        objects.device_taint_rules.len(),
    ]
}

/// A KubeSchedulerConfiguration document → resolved profiles → an engine. Invariants: no panic; a
/// configuration that resolves has at least one profile, unique scheduler names, percentages in
/// [0, 100], and every profile instantiates over a one-node snapshot and schedules a pod there.
pub fn scheduler_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let registry = in_tree_registry();
    let Ok(config) = SchedulerConfig::from_str(&text, "fuzz-input", &registry) else {
        return;
    };
    assert!(
        !config.profiles.is_empty(),
        "a resolved configuration has a profile"
    );
    assert!((0..=100).contains(&config.percentage_of_nodes_to_score));
    let mut names: Vec<&str> = config
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(
        names.len(),
        before,
        "duplicate schedulerName in a resolved configuration"
    );
    let engine = Engine::new(registry, config, "fuzz-input");
    let snapshot = Arc::new(one_node_snapshot());
    for profile in &engine.config().profiles {
        let fwk = engine.framework(profile, snapshot.clone()).unwrap_or_else(|e| {
            panic!(
                "profile {:?} resolved but does not instantiate: {e}",
                profile.scheduler_name
            )
        });
        let pod = small_pod(&profile.scheduler_name);
        let _ = schedule(&fwk, &PodInfo::new(pod), engine.schedule_options(false));
    }
}

fn one_node_snapshot() -> Snapshot {
    let node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    }))
    .expect("node JSON");
    Snapshot::new(ClusterObjects {
        nodes: vec![node],
        ..ClusterObjects::default()
    })
}

fn small_pod(scheduler_name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p", "labels": {"app": "a"}},
        "spec": {"schedulerName": scheduler_name, "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .expect("pod JSON")
}

/// A quantity string → `Value()` and `MilliValue()`. Invariants: no panic; both parse or neither;
/// both round up (ceil) the same number, so unless one saturated, `value*1000 - 1000 < milli <=
/// value*1000`.
pub fn quantity(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let value = parse_value(&text);
    let milli = parse_milli_value(&text);
    assert_eq!(value.is_ok(), milli.is_ok(), "{text:?}: {value:?} vs {milli:?}");
    let (Ok(value), Ok(milli)) = (value, milli) else {
        return;
    };
    let saturated = [i64::MIN, i64::MAX].contains(&milli) || value.unsigned_abs() >= (i64::MAX as u64) / 1000;
    if !saturated {
        let scaled = i128::from(value) * 1000;
        let milli = i128::from(milli);
        assert!(
            scaled - 1000 < milli && milli <= scaled,
            "{text:?}: Value() {value} and MilliValue() {milli} are not the same number rounded up"
        );
    }
}

/// Label selectors: kubectl's `-l` text syntax always; a JSON LabelSelector or NodeSelector when the
/// input decodes as one. Invariants: no panic; blank text selects everything; a selector whose
/// requirements name distinct keys matches the labels built to satisfy each requirement.
pub fn label_selector(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Selector::parse(&text) {
        Ok(selector) => {
            if text.trim().is_empty() {
                assert!(selector.is_everything(), "blank text must select everything");
            }
            check_witness(&selector, &text);
        }
        Err(e) => {
            assert!(!text.trim().is_empty(), "blank text must parse");
            let _ = e.to_string();
        }
    }
    if let Ok(selector) = serde_json::from_slice::<LabelSelector>(data)
        && let Ok(parsed) = Selector::from_label_selector(Some(&selector))
    {
        check_witness(&parsed, &text);
    }
    if let Ok(selector) = serde_json::from_slice::<NodeSelector>(data) {
        let matcher = NodeSelectorMatcher::new(&selector);
        let _ = matcher.matches(&Labels::new(), "n1");
        if let Ok(strict) = NodeSelectorMatcher::parse(&selector) {
            let _ = strict.matches(&Labels::new(), "n1");
        }
    }
}

/// When every requirement names its own key, labels satisfying each one alone satisfy the selector.
fn check_witness(selector: &Selector, text: &str) {
    let _ = selector.matches(&Labels::new());
    let Selector::Requirements(reqs) = selector else {
        return;
    };
    let mut witness = Labels::new();
    let mut keys = std::collections::BTreeSet::new();
    for req in reqs {
        let key = match req {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::Gt(k, _)
            | Requirement::Lt(k, _) => k,
        };
        if !keys.insert(key.clone()) {
            return;
        }
        match req {
            Requirement::In(k, values) => {
                witness.insert(k.clone(), values.first().cloned().unwrap_or_default());
            }
            Requirement::Exists(k) => {
                witness.insert(k.clone(), String::new());
            }
            Requirement::Gt(k, n) => {
                witness.insert(k.clone(), n.saturating_add(1).to_string());
            }
            Requirement::Lt(k, n) => {
                witness.insert(k.clone(), n.saturating_sub(1).to_string());
            }
            Requirement::NotIn(..) | Requirement::DoesNotExist(_) => {}
        }
    }
    let satisfiable = reqs.iter().all(|r| match r {
        Requirement::In(_, values) => !values.is_empty(),
        Requirement::Gt(_, n) => *n < i64::MAX,
        Requirement::Lt(_, n) => *n > i64::MIN,
        _ => true,
    });
    if satisfiable {
        assert!(
            selector.matches(&witness),
            "{text:?}: {selector:?} does not match {witness:?}, built to satisfy it"
        );
    }
}

/// An API server's list body, cut into chunks at points the first byte chooses, through the
/// streaming splitter. Invariants: no panic; when the body is a JSON object with one `items` key whose
/// value is an array of objects, the splitter accepts it, and the items of its batches followed by
/// those left in its envelope (which the loader decodes as a last page: a key written with escapes is
/// not split) are exactly the list's items, in order; the envelope is the rest of the list.
pub fn list_split(data: &[u8]) {
    /// The list as the page decoder reads it: serde refuses a second `items` key.
    #[derive(serde::Deserialize)]
    struct ListShape {
        #[serde(default)]
        #[allow(dead_code)]
        items: Option<serde_json::Value>,
    }
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(seed % 64) + 1;
    let mut splitter = ListSplitter::new(usize::from(seed) * 8 + 1);
    let mut batches = Vec::new();
    let mut refused = false;
    for chunk in body.chunks(step) {
        if splitter.push(chunk).is_err() {
            refused = true;
            break;
        }
        match splitter.take_batches() {
            Ok(b) => batches.extend(b),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    let finished = if refused { None } else { splitter.finish().ok() };
    let whole: Option<serde_json::Value> = serde_json::from_slice(body)
        .ok()
        .filter(|_| serde_json::from_slice::<ListShape>(body).is_ok());
    let expected_items = whole.as_ref().and_then(|v| {
        let items = v.as_object()?.get("items")?.as_array()?;
        items
            .iter()
            .all(serde_json::Value::is_object)
            .then(|| items.clone())
    });
    let Some(expected) = expected_items else {
        return;
    };
    let (rest, envelope) = finished.expect("a JSON list of objects is accepted");
    batches.extend(rest);
    let mut envelope: serde_json::Value = serde_json::from_str(&envelope).expect("the envelope is JSON");
    let mut items: Vec<serde_json::Value> = batches
        .iter()
        .flat_map(|b| {
            let v: serde_json::Value = serde_json::from_str(b).expect("a batch is JSON");
            v["items"].as_array().expect("a batch holds items").clone()
        })
        .collect();
    items.extend(envelope["items"].as_array().cloned().unwrap_or_default());
    assert_eq!(items, expected, "the batches hold other items than the list");
    let mut whole = whole.expect("parsed above");
    whole["items"] = serde_json::json!([]);
    envelope["items"] = serde_json::json!([]);
    assert_eq!(envelope, whole, "the envelope lost or changed a field");
}
