//! Tests of the entry points across formats (every accepted file shape, errors, compact loads), and
//! the fixtures and helpers the other files' tests share.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::snapshot::requests::calculate_resource;
use crate::testing::generate::{GenerateParams, generate, generate_pruned};

pub(super) fn load(text: &str) -> Result<(ClusterObjects, LoadReport), LoadError> {
    load_bytes(text.as_bytes(), Path::new("snap.yaml"))
}

/// Objects per kind, for compact assertions.
fn counts(o: &ClusterObjects) -> BTreeMap<&'static str, usize> {
    ObjectKind::ALL
        .iter()
        .map(|k| (k.kind(), k.count(o)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn names<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(items: &[T]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.metadata().name.clone().unwrap_or_default())
        .collect()
}

pub(super) const YAML_LIST: &str = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {topology.kubernetes.io/zone: a}
  status:
    allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata:
    name: web-0
    namespace: default
  spec:
    nodeName: n1
    containers:
    - name: c
      image: nginx
      resources:
        requests: {cpu: 500m}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: default}
  spec: {selector: {matchLabels: {app: web}}, template: {spec: {containers: []}}}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: pdb, namespace: default}
  spec: {maxUnavailable: 1}
- apiVersion: policy/v1beta1
  kind: PodDisruptionBudget
  metadata: {name: old-pdb, namespace: default}
kind: List
metadata:
  resourceVersion: ""
"#;

pub(super) const YAML_MULTI: &str = r#"# a comment before the first document
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1, namespace: team-a}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: team-a}}
---
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"#;

pub(super) const JSON_LIST: &str = r#"{
    "apiVersion": "v1",
    "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}},
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}},
        {"metadata": {"name": "sc"}, "provisioner": "x", "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass"},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}"#;

pub(super) const JSON_STREAM: &str = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}
{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "d"}, "spec": {}}"#;

pub(super) const JSON_POD_LIST: &str = r#"{"apiVersion": "v1", "kind": "PodList", "metadata": {},
 "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}"#;

pub(super) const YAML_NODE_LIST: &str =
    "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";

pub(super) const YAML_SINGLE: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: db\n  annotations:\n    volume.kubernetes.io/selected-node: n1\n    example.com/noise: x\nspec:\n  storageClassName: fast\n";

#[test]
fn loads_every_supported_shape() {
    struct Case {
        name: &'static str,
        text: &'static str,
        format: Format,
        documents: usize,
        counts: &'static [(&'static str, usize)],
        skipped: &'static [(&'static str, usize)],
    }
    let cases = [
        Case {
            name: "yaml List of mixed kinds",
            text: YAML_LIST,
            format: Format::Yaml,
            documents: 1,
            counts: &[("Node", 1), ("Pod", 1), ("PodDisruptionBudget", 1)],
            skipped: &[
                ("Deployment (apps/v1)", 1),
                ("PodDisruptionBudget (policy/v1beta1)", 1),
            ],
        },
        Case {
            name: "json documents separated by --- lines and comments",
            text: "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}\n---\n# the pod\n{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\", \"namespace\": \"a\"}, \"spec\": {\"containers\": []}}\n...\n---\n{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"scheduling.k8s.io/v1\", \"kind\": \"PriorityClass\", \"metadata\": {\"name\": \"high\"}, \"value\": 10}]}\n",
            format: Format::Json,
            documents: 3,
            counts: &[("Namespace", 1), ("Pod", 1), ("PriorityClass", 1)],
            skipped: &[],
        },
        Case {
            name: "multi-document yaml with a List and empty documents",
            text: YAML_MULTI,
            format: Format::Yaml,
            documents: 4,
            counts: &[("Namespace", 1), ("Pod", 1), ("PriorityClass", 1)],
            skipped: &[("ConfigMap (v1)", 1)],
        },
        Case {
            name: "json List (keys in any order)",
            text: JSON_LIST,
            format: Format::Json,
            documents: 1,
            counts: &[("Node", 2), ("Pod", 1), ("StorageClass", 1)],
            skipped: &[("Secret (v1)", 1)],
        },
        Case {
            name: "concatenated json values",
            text: JSON_STREAM,
            format: Format::Json,
            documents: 3,
            counts: &[("Node", 1), ("Pod", 1), ("CSIDriver", 1)],
            skipped: &[],
        },
        Case {
            name: "json typed list without item kinds",
            text: JSON_POD_LIST,
            format: Format::Json,
            documents: 1,
            counts: &[("Pod", 2)],
            skipped: &[],
        },
        Case {
            name: "yaml typed list without item kinds",
            text: YAML_NODE_LIST,
            format: Format::Yaml,
            documents: 1,
            counts: &[("Node", 2)],
            skipped: &[],
        },
        Case {
            name: "single yaml object",
            text: YAML_SINGLE,
            format: Format::Yaml,
            documents: 1,
            counts: &[("PersistentVolumeClaim", 1)],
            skipped: &[],
        },
        Case {
            name: "single json object",
            text: r#"  {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "x"}}"#,
            format: Format::Json,
            documents: 1,
            counts: &[("Service", 1)],
            skipped: &[],
        },
        Case {
            // The YAML parser reports an empty stream as one empty document.
            name: "empty file",
            text: "",
            format: Format::Yaml,
            documents: 1,
            counts: &[],
            skipped: &[],
        },
    ];
    for c in cases {
        let (objects, report) = load(c.text).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(report.format, c.format, "{}", c.name);
        assert_eq!(report.documents, c.documents, "{}", c.name);
        let want: BTreeMap<&str, usize> = c.counts.iter().copied().collect();
        assert_eq!(counts(&objects), want, "{}", c.name);
        assert_eq!(report.objects, want.values().sum::<usize>(), "{}", c.name);
        let skipped: BTreeMap<String, usize> = c.skipped.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(report.skipped, skipped, "{}", c.name);
    }
}

#[test]
fn loaded_objects_keep_their_fields_and_order() {
    let (o, _) = load(YAML_LIST).unwrap();
    assert_eq!(names(&o.nodes), ["n1"]);
    let pod = &o.pods[0];
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert_eq!(
        calculate_resource(pod, &crate::features::FeatureGates::v1_37())
            .resource
            .milli_cpu,
        500
    );

    let (o, _) = load(JSON_LIST).unwrap();
    assert_eq!(names(&o.nodes), ["n1", "n2"]);
    let (o, _) = load(JSON_POD_LIST).unwrap();
    assert_eq!(names(&o.pods), ["a", "b"]);

    let (o, _) = load(YAML_SINGLE).unwrap();
    let pvc = &o.persistent_volume_claims[0];
    assert_eq!(
        pvc.metadata.annotations,
        Some(BTreeMap::from([(
            "volume.kubernetes.io/selected-node".to_string(),
            "n1".to_string()
        )])),
        "scheduler annotations stay, others go"
    );
    let (o, _) = load(YAML_MULTI).unwrap();
    assert_eq!(o.priority_classes[0].value, Some(1000));
    assert_eq!(
        o.namespaces[0].metadata.labels.as_ref().unwrap()["team"],
        "a",
        "namespace labels feed namespaceSelectors"
    );
}

#[test]
fn warnings_name_skipped_kinds() {
    let (_, report) = load(YAML_LIST).unwrap();
    assert_eq!(report.skipped_total(), 2);
    assert_eq!(
        report.notes(),
        ["skipped 1 object(s) of kind Deployment (apps/v1): not used by the scheduler"]
    );
    assert_eq!(
        report.warnings(),
        [
            "skipped 1 object(s) of kind PodDisruptionBudget (policy/v1beta1): kubectl-sched reads \
          PodDisruptionBudget as policy/v1 only, so these are ignored"
        ]
    );
}

struct ErrCase {
    name: &'static str,
    text: &'static str,
    want: &'static str,
}

#[test]
fn errors_say_where_and_what() {
    let cases = [
        ErrCase {
            name: "malformed yaml",
            text: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indent\n",
            want: "snap.yaml: document[0] (line 5, column 7): malformed YAML: mapping values are not allowed in this context",
        },
        ErrCase {
            name: "malformed yaml in the second document",
            text: "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: [unclosed\n",
            want: "snap.yaml: document[1]",
        },
        ErrCase {
            name: "malformed json",
            text: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    {\"kind\": \"Pod\" \"apiVersion\": \"v1\"}\n  ]\n}\n",
            want: "snap.yaml: document[0] (line 5, column 20): malformed JSON: expected `,` or `}`",
        },
        ErrCase {
            name: "malformed json in the second of --- separated documents",
            text: "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"a\"}}\n---\n{\"apiVersion\": \"v1\",\n  \"kind\": \"Pod\" \"x\": 1}\n",
            want: "snap.yaml: document[1] (line 4, column 17): malformed JSON: expected `,` or `}`",
        },
        ErrCase {
            name: "wrong type in a yaml List item",
            text: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: ok, namespace: default}\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: web-1\n    namespace: default\n  spec:\n    priority: high\n    containers: []\n",
            want: "snap.yaml: document[0].items[1] (line 13, column 15): Pod default/web-1: ",
        },
        ErrCase {
            name: "wrong type in a single yaml object",
            text: "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nspec:\n  unschedulable: maybe\n",
            want: "snap.yaml: document[0] (line 6, column 18): Node n1: ",
        },
        ErrCase {
            name: "wrong type in a json List item",
            text: "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n {\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"n1\"}},\n {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\", \"namespace\": \"ns\"},\n  \"spec\": {\"containers\": [], \"priority\": \"high\"}}\n]}",
            want: "snap.yaml: document[0].items[1] (line 4, column 47): Pod ns/p: spec.priority: invalid type: string \"high\", expected i32",
        },
        ErrCase {
            name: "wrong type in a typed list item without kind",
            text: "{\"kind\": \"PodList\", \"apiVersion\": \"v1\", \"items\": [{\"metadata\": {\"name\": 5}}]}",
            want: "snap.yaml: document[0].items[0] (line 1, column 73): Pod (unnamed): metadata.name: invalid type: integer `5`, expected a string",
        },
        ErrCase {
            name: "list item without kind",
            text: "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: x}\n",
            want: "snap.yaml: document[0].items[0]: list item has no kind",
        },
        ErrCase {
            name: "json list item that is not an object",
            text: "{\"kind\": \"List\", \"apiVersion\": \"v1\", \"items\": [\"nope\"]}",
            want: "snap.yaml: document[0].items[0] (line 1): list item is not an object",
        },
        ErrCase {
            name: "document that is a scalar",
            text: "just a string\n",
            want: "snap.yaml: document[0]",
        },
        ErrCase {
            name: "object without kind",
            text: "apiVersion: v1\nmetadata: {name: x}\n",
            want: "snap.yaml: document[0]: object has no kind",
        },
    ];
    for c in cases {
        let err = load(c.text).err().unwrap_or_else(|| panic!("{}: loaded", c.name));
        let msg = err.to_string();
        assert!(
            msg.starts_with(c.want),
            "{}:\n got  {msg}\n want {}",
            c.name,
            c.want
        );
    }
}

#[test]
fn decode_errors_carry_structured_fields() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: ns}\n  spec: {containers: [{name: c, ports: [{containerPort: x}]}]}\n";
    match load(text) {
        Err(LoadError::Decode(d)) => {
            assert_eq!((d.at.document, d.at.item, d.at.line), (0, Some(0), Some(7)));
            assert_eq!((d.kind.as_str(), d.api_version.as_str()), ("Pod", "v1"));
            assert_eq!(d.name.as_deref(), Some("ns/p"));
        }
        other => panic!("{other:?}"),
    }
    match load_bytes(b"\xff\xfe", Path::new("bin.json")) {
        Err(LoadError::Syntax { message, .. }) => assert!(message.contains("UTF-8"), "{message}"),
        other => panic!("{other:?}"),
    }
    match load_file("/nonexistent/snap.yaml") {
        Err(e @ LoadError::Io { .. }) => assert!(e.to_string().starts_with("/nonexistent/snap.yaml: ")),
        other => panic!("{other:?}"),
    }
}

pub(super) fn assert_same(a: &ClusterObjects, b: &ClusterObjects) {
    assert_eq!(a.nodes, b.nodes);
    assert_eq!(a.pods, b.pods);
    assert_eq!(a.namespaces, b.namespaces);
    assert_eq!(a.persistent_volumes, b.persistent_volumes);
    assert_eq!(a.persistent_volume_claims, b.persistent_volume_claims);
    assert_eq!(a.storage_classes, b.storage_classes);
    assert_eq!(a.csi_nodes, b.csi_nodes);
    assert_eq!(a.csi_drivers, b.csi_drivers);
    assert_eq!(a.csi_storage_capacities, b.csi_storage_capacities);
    assert_eq!(a.volume_attachments, b.volume_attachments);
    assert_eq!(a.pod_disruption_budgets, b.pod_disruption_budgets);
    assert_eq!(a.priority_classes, b.priority_classes);
    assert_eq!(a.services, b.services);
    assert_eq!(a.replication_controllers, b.replication_controllers);
    assert_eq!(a.replica_sets, b.replica_sets);
    assert_eq!(a.stateful_sets, b.stateful_sets);
    assert_eq!(a.resource_claims, b.resource_claims);
    assert_eq!(a.device_classes, b.device_classes);
    assert_eq!(a.resource_slices, b.resource_slices);
    assert_eq!(a.resource_claim_templates, b.resource_claim_templates);
}

#[test]
fn generated_json_file_loads_pruned_and_snapshot_builds() {
    let params = GenerateParams::new(30, 1_500, 3, 11);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.json");
    let size = crate::testing::generate::write_json_list(&params, &path).unwrap();
    assert!(size > 1_000_000, "realistic objects: {size} bytes");
    let (loaded, report) = load_file(&path).unwrap();
    assert_same(&loaded, &generate_pruned(&params));
    assert_eq!(report.documents, 1);
    let (snapshot, _) = Snapshot::from_file(&path).unwrap();
    assert_eq!(snapshot.nodes().len(), 30);
}

/// A compact load (pods on nodes reduced as they are read) builds the same snapshot as a full one,
/// in the JSON streaming path and in the YAML path, and keeps the named pod whole.
#[test]
fn compact_placed_load_builds_the_same_snapshot() {
    let params = GenerateParams::new(12, 400, 2, 5);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cluster.json");
    crate::testing::generate::write_json_list(&params, &json).unwrap();
    let yaml = dir.path().join("cluster.yaml");
    write_list_yaml(&generate(&params), std::fs::File::create(&yaml).unwrap()).unwrap();

    let (full, _) = load_file(&json).unwrap();
    let kept = full
        .pods
        .iter()
        .find(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .map(|p| {
            crate::snapshot::namespaced_key(
                p.metadata.namespace.as_deref().unwrap_or(""),
                p.metadata.name.as_deref().unwrap_or(""),
            )
        })
        .expect("a bound pod");
    let expected = Snapshot::new(full);
    let detail = PodDetail::CompactPlaced {
        keep: [kept.clone()].into(),
    };
    let loads = [
        load_file_with(&json, &detail).unwrap().0,
        // Small chunks: pods are placed chunk by chunk and the reader reuses buffers.
        stream_json_file(&json, 4096, &detail)
            .unwrap_or_else(|_| panic!("fell back"))
            .0,
        load_file_with(&yaml, &detail).unwrap().0,
    ];
    for (path, compact) in [&json, &json, &yaml].into_iter().zip(loads) {
        assert!(!compact.placed_pods.is_empty(), "{}", path.display());
        assert_eq!(
            compact
                .pods
                .iter()
                .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .count(),
            1,
            "only the kept pod stays whole among pods on nodes"
        );
        let whole = compact
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == kept.split('/').nth(1));
        assert!(whole.is_some_and(|p| p.spec.as_ref().is_some_and(|s| !s.containers.is_empty())));
        let got = Snapshot::new(compact);
        assert_eq!(got.nodes().len(), expected.nodes().len());
        for (a, b) in got.nodes().iter().zip(expected.nodes()) {
            assert_eq!(a.name(), b.name());
            assert_eq!(a.requested, b.requested, "{}", a.name());
            assert_eq!(a.non_zero_requested, b.non_zero_requested, "{}", a.name());
            assert_eq!(a.used_ports, b.used_ports, "{}", a.name());
            assert_eq!(a.pvc_ref_counts, b.pvc_ref_counts, "{}", a.name());
            let names = |n: &crate::snapshot::NodeInfo| n.pods.iter().map(|p| p.key()).collect::<Vec<_>>();
            let names_with_kept_last = |n: &crate::snapshot::NodeInfo| {
                let mut v = names(n);
                v.sort_by_key(|k| *k == kept);
                v
            };
            assert_eq!(names(a), names_with_kept_last(b), "{}", a.name());
        }
        let keys = |s: &Snapshot| s.pending_pods.iter().map(|p| p.key()).collect::<Vec<_>>();
        assert_eq!(keys(&got), keys(&expected));
    }
}

const DRA_YAML: &str = r#"apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
  managedFields: [{manager: kubectl}]
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: n1-gpus}
  spec:
    driver: gpu.example.com
    nodeName: n1
    pool: {name: n1, generation: 2, resourceSliceCount: 1}
    devices:
    - name: gpu-0
      attributes:
        model: {string: a100}
      capacity:
        memory: {value: 40Gi}
- apiVersion: resource.k8s.io/v1
  kind: ResourceSlice
  metadata: {name: fabric}
  spec:
    driver: nic.example.com
    allNodes: true
    pool: {name: fabric, generation: 1, resourceSliceCount: 1}
    devices: [{name: nic-0}]
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: one-gpu, namespace: ml}
  spec:
    spec:
      devices:
        requests:
        - name: gpu
          exactly: {deviceClassName: gpu.example.com}
- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata: {name: used, namespace: ml}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
  status:
    allocation:
      devices:
        results:
        - {request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}
"#;

const DRA_JSON: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
  "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}},
 {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "zone-a"},
  "spec": {"driver": "gpu.example.com", "pool": {"name": "zone-a", "generation": 1, "resourceSliceCount": 1},
   "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions":
     [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
   "devices": [{"name": "gpu-0"}]}},
 {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
  "metadata": {"name": "one-gpu", "namespace": "ml"}, "spec": {"spec": {}}}
]}"#;

#[test]
fn dra_kinds_load_from_yaml_and_json() {
    let (o, report) = load(DRA_YAML).unwrap();
    assert_eq!(report.documents, 2);
    let want: BTreeMap<&str, usize> = [
        ("DeviceClass", 1),
        ("ResourceClaim", 1),
        ("ResourceClaimTemplate", 1),
        ("ResourceSlice", 2),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts(&o), want);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    // Metadata is pruned as for other kinds; specs are kept whole.
    assert!(o.device_classes[0].metadata.managed_fields.is_none());
    let class_spec = o.device_classes[0].spec.as_ref().unwrap();
    assert_eq!(
        class_spec.selectors.as_ref().unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression,
        r#"device.driver == "gpu.example.com""#
    );
    assert_eq!(names(&o.resource_slices), ["n1-gpus", "fabric"]);
    let device = &o.resource_slices[0].spec.devices.as_ref().unwrap()[0];
    assert_eq!(
        device.attributes.as_ref().unwrap()["model"].string.as_deref(),
        Some("a100")
    );
    assert_eq!(device.capacity.as_ref().unwrap()["memory"].value.0, "40Gi");
    assert_eq!(o.resource_slices[0].spec.pool.generation, 2);
    let template = o.resource_claim_templates[0].spec.as_ref().unwrap();
    assert_eq!(
        template
            .spec
            .as_ref()
            .unwrap()
            .devices
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()[0]
            .name,
        "gpu"
    );

    let snapshot = crate::snapshot::Snapshot::new(o);
    assert!(snapshot.device_classes.contains_key("gpu.example.com"));
    assert!(snapshot.resource_claim_templates.contains_key("ml/one-gpu"));
    let for_n1: Vec<_> = snapshot
        .resource_slices
        .for_node("n1")
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(for_n1, ["n1-gpus", "fabric"]);
    assert_eq!(snapshot.resource_slices.for_node("n2").count(), 1);
    assert_eq!(
        snapshot.allocated.allocated_devices,
        [crate::snapshot::DeviceId::new("gpu.example.com", "n1", "gpu-0")]
            .into_iter()
            .collect()
    );

    let (o, report) = load(DRA_JSON).unwrap();
    assert_eq!(report.format, Format::Json);
    let want: BTreeMap<&str, usize> = [
        ("DeviceClass", 1),
        ("ResourceClaimTemplate", 1),
        ("ResourceSlice", 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts(&o), want);
    let snapshot = crate::snapshot::Snapshot::new(o);
    assert_eq!(snapshot.resource_slices.node_selector.len(), 1);
    assert!(snapshot.resource_slices.by_node.is_empty());

    // Written back and read again, they are the same.
    let (o, _) = load(DRA_YAML).unwrap();
    let mut buf = Vec::new();
    write_list_json(&o, &mut buf).unwrap();
    let (again, _) = load_bytes(&buf, Path::new("snap.json")).unwrap();
    assert_same(&o, &again);
}

#[test]
fn dra_decode_errors_say_where_and_what() {
    let cases = [
        ErrCase {
            name: "wrong type in a json ResourceSlice",
            text: "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n {\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\", \"metadata\": {\"name\": \"s\"},\n  \"spec\": {\"driver\": \"d\", \"pool\": {\"name\": \"p\", \"generation\": \"two\", \"resourceSliceCount\": 1}}}\n]}",
            want: "snap.yaml: document[0].items[0] (line 3, column",
        },
        ErrCase {
            name: "json ResourceSlice error names the object and field",
            text: "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n {\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\", \"metadata\": {\"name\": \"s\"},\n  \"spec\": {\"driver\": \"d\", \"pool\": {\"name\": \"p\", \"generation\": \"two\", \"resourceSliceCount\": 1}}}\n]}",
            want: "ResourceSlice s: spec.pool.generation: invalid type: string \"two\"",
        },
        ErrCase {
            name: "wrong type in a yaml DeviceClass",
            text: "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n  selectors: 5\n",
            want: "snap.yaml: document[0] (line 5, column 14): DeviceClass gpu: spec.selectors: invalid type",
        },
        ErrCase {
            name: "wrong type in a yaml ResourceClaimTemplate list item",
            text: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaimTemplate\n  metadata: {name: t, namespace: ml}\n  spec: {spec: {devices: {requests: true}}}\n",
            want: "snap.yaml: document[0].items[0] (line 7, column",
        },
        ErrCase {
            name: "yaml ResourceClaimTemplate error names the object and field",
            text: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaimTemplate\n  metadata: {name: t, namespace: ml}\n  spec: {spec: {devices: {requests: true}}}\n",
            want: "ResourceClaimTemplate ml/t: items[0].spec.spec.devices.requests: invalid type: boolean `true`, expected a sequence",
        },
    ];
    for c in cases {
        let err = load(c.text).err().unwrap_or_else(|| panic!("{}: loaded", c.name));
        let msg = err.to_string();
        assert!(
            msg.starts_with(c.want) || (!c.want.starts_with("snap.yaml") && msg.contains(c.want)),
            "{}:\n got  {msg}\n want {}",
            c.name,
            c.want
        );
    }
}

/// A malformed quantity fails the load with the file, the object and the field, whatever the format
/// and however pods on nodes are kept (a compact JSON load reduces them while streaming).
#[test]
fn malformed_quantities_fail_naming_file_object_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad_pod = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4"}}},
        {"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"shop","name":"web-1"},
         "spec":{"nodeName":"n1","containers":[{"name":"c","resources":{"requests":{"cpu":"oops"}}}]}}]}"#;
    let bad_node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  allocatable: {cpu: \"4\", pods: lots}\n";
    let compact = PodDetail::CompactPlaced {
        keep: Default::default(),
    };
    let cases = [
        (
            "pod in JSON, whole",
            "snapshot.json",
            bad_pod,
            PodDetail::Full,
            "Pod shop/web-1: spec.containers[0].resources.requests.cpu: quantity \"oops\" does not parse",
        ),
        (
            "pod in JSON, compact",
            "snapshot.json",
            bad_pod,
            compact.clone(),
            "Pod shop/web-1: spec.containers[0].resources.requests.cpu: quantity \"oops\" does not parse",
        ),
        (
            "pod in YAML (JSON is YAML), compact",
            "snapshot.yaml",
            &format!("# a comment makes it YAML\n{bad_pod}"),
            compact.clone(),
            "Pod shop/web-1: spec.containers[0].resources.requests.cpu: quantity \"oops\" does not parse",
        ),
        (
            "node in YAML",
            "snapshot.yaml",
            bad_node,
            PodDetail::Full,
            "Node n1: status.allocatable.pods: quantity \"lots\" does not parse",
        ),
    ];
    for (name, file, text, detail, want) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        let err = load_file_with(&path, &detail).expect_err(name);
        assert!(matches!(err, LoadError::Quantity { .. }), "{name}: {err}");
        assert_eq!(err.to_string(), format!("{}: {want}", path.display()), "{name}");
    }
    // The same objects with well-formed quantities load.
    let path = dir.path().join("good.json");
    std::fs::write(&path, bad_pod.replace("oops", "250m")).unwrap();
    assert_eq!(load_file_with(&path, &compact).unwrap().0.len(), 2);
}

/// VolumeAttachments (storage.k8s.io/v1) load from YAML and JSON, survive a write and a read, and
/// the snapshot finds them by node.
#[test]
fn volume_attachments_load_and_index_by_node() {
    const YAML: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: storage.k8s.io/v1
  kind: VolumeAttachment
  metadata:
    name: csi-0123
    managedFields: [{manager: kube-controller-manager}]
  spec:
    attacher: csi.example.com
    nodeName: n1
    source: {persistentVolumeName: pv-data}
  status: {attached: true}
- apiVersion: storage.k8s.io/v1
  kind: VolumeAttachment
  metadata: {name: csi-4567}
  spec: {attacher: csi.example.com, nodeName: n2, source: {persistentVolumeName: pv-logs}}
"#;
    const JSON: &str = r#"{"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachmentList", "items": [
 {"metadata": {"name": "csi-89ab"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
  "source": {"persistentVolumeName": "pv-old"}}, "status": {"attached": false}}]}"#;

    let (o, report) = load(YAML).unwrap();
    assert_eq!(counts(&o), [("VolumeAttachment", 2)].into_iter().collect());
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert!(o.volume_attachments[0].metadata.managed_fields.is_none());
    assert_eq!(names(&o.volume_attachments), ["csi-0123", "csi-4567"]);
    let spec = &o.volume_attachments[0].spec;
    assert_eq!(
        (spec.attacher.as_str(), spec.node_name.as_str()),
        ("csi.example.com", "n1")
    );
    assert_eq!(spec.source.persistent_volume_name.as_deref(), Some("pv-data"));

    let mut buf = Vec::new();
    write_list_yaml(&o, &mut buf).unwrap();
    let (again, _) = load_bytes(&buf, Path::new("snap.yaml")).unwrap();
    assert_same(&o, &again);

    let snapshot = Snapshot::new(o);
    let on = |node: &str| -> Vec<String> {
        snapshot
            .volume_attachments
            .get(node)
            .into_iter()
            .flatten()
            .map(|a| a.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(on("n1"), ["csi-0123"]);
    assert_eq!(on("n2"), ["csi-4567"]);
    assert!(on("n3").is_empty());

    let (o, report) = load(JSON).unwrap();
    assert_eq!(report.format, Format::Json);
    assert_eq!(names(&o.volume_attachments), ["csi-89ab"]);
    assert_eq!(
        o.volume_attachments[0].status.as_ref().map(|s| s.attached),
        Some(false)
    );
}
