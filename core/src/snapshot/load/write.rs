//! Writing [`ClusterObjects`] back as one `kind: List` document, JSON or YAML, in the shape
//! `kubectl get -o json|yaml` prints (what `kubectl sched snapshot` saves and the loaders read),
//! optionally recording the cluster's Kubernetes version in a top-level `kubeVersion` key: kubectl
//! and older loaders ignore a List's unknown keys, so such a file stays readable everywhere.

use std::collections::BTreeMap;
use std::io;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::kind::serialize_items;
use crate::features::KubeVersion;
use crate::snapshot::ClusterObjects;

/// The List key that records the Kubernetes version the objects were read from (`kubeVersion:
/// v1.34.4`), which `explain --from` evaluates with.
pub const KUBE_VERSION_KEY: &str = "kubeVersion";

/// Serializes as `{apiVersion: v1, kind: List, metadata: {resourceVersion: ""}, items: [...]}`, the
/// shape `kubectl get -o yaml|json` prints for several kinds, plus `kubeVersion` when known.
pub struct ListView<'a>(pub &'a ClusterObjects, pub Option<KubeVersion>);

struct ItemsView<'a>(&'a ClusterObjects);

impl Serialize for ItemsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        serialize_items(self.0, &mut seq)?;
        seq.end()
    }
}

impl Serialize for ListView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4 + usize::from(self.1.is_some())))?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("items", &ItemsView(self.0))?;
        map.serialize_entry("kind", "List")?;
        if let Some(version) = &self.1 {
            map.serialize_entry(KUBE_VERSION_KEY, version)?;
        }
        map.serialize_entry("metadata", &BTreeMap::from([("resourceVersion", "")]))?;
        map.end()
    }
}

/// Writes the objects as one YAML `kind: List`.
pub fn write_list_yaml<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), yaml_serde::Error> {
    write_versioned_list_yaml(objects, None, writer)
}

/// Writes the objects as one YAML `kind: List` recording `version` (what `kubectl sched snapshot`
/// saves).
pub fn write_versioned_list_yaml<W: io::Write>(
    objects: &ClusterObjects,
    version: Option<KubeVersion>,
    writer: W,
) -> Result<(), yaml_serde::Error> {
    yaml_serde::to_writer(writer, &ListView(objects, version))
}

/// Writes the objects as one JSON `kind: List`, indented like `kubectl get -o json`. Loading JSON is
/// several times faster than YAML, so prefer it for large clusters.
pub fn write_list_json<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), serde_json::Error> {
    write_versioned_list_json(objects, None, writer)
}

/// [`write_list_json`] recording `version`.
pub fn write_versioned_list_json<W: io::Write>(
    objects: &ClusterObjects,
    version: Option<KubeVersion>,
    writer: W,
) -> Result<(), serde_json::Error> {
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(writer, formatter);
    ListView(objects, version).serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::snapshot::load::tests::{assert_same, load};
    use crate::snapshot::load::{Format, load_bytes};
    use crate::testing::generate::{GenerateParams, generate_pruned};

    #[test]
    fn dump_then_load_round_trips_in_both_formats() {
        let original = generate_pruned(&GenerateParams::new(12, 400, 3, 5));
        assert!(original.len() > 400);

        let mut yaml = Vec::new();
        write_list_yaml(&original, &mut yaml).unwrap();
        let text = String::from_utf8(yaml).unwrap();
        assert!(text.starts_with("apiVersion: v1\nitems:\n"), "{}", &text[..40]);
        let (loaded, report) = load(&text).unwrap();
        assert_same(&loaded, &original);
        assert_eq!((report.format, report.objects), (Format::Yaml, original.len()));

        let mut json = Vec::new();
        write_list_json(&original, &mut json).unwrap();
        let (loaded, report) = load_bytes(&json, Path::new("snap.json")).unwrap();
        assert_same(&loaded, &original);
        assert_eq!((report.format, report.skipped_total()), (Format::Json, 0));
        assert_eq!(report.kube_version, None);
    }

    #[test]
    fn the_recorded_version_survives_a_round_trip_in_every_reader() {
        let original = generate_pruned(&GenerateParams::new(3, 20, 1, 1));
        let version = KubeVersion::new(34, 4);
        let mut yaml = Vec::new();
        write_versioned_list_yaml(&original, Some(version), &mut yaml).unwrap();
        let mut json = Vec::new();
        write_versioned_list_json(&original, Some(version), &mut json).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let json_file = dir.path().join("snap.json");
        std::fs::write(&json_file, &json).unwrap();
        let reads = [
            ("yaml", load_bytes(&yaml, Path::new("snap.yaml")).unwrap()),
            ("json", load_bytes(&json, Path::new("snap.json")).unwrap()),
            // The streaming reader, which reads the envelope apart from the items.
            (
                "json stream",
                super::super::stream::stream_json_file(&json_file, 4096, &crate::snapshot::PodDetail::Full)
                    .unwrap(),
            ),
        ];
        for (reader, (loaded, report)) in reads {
            assert_same(&loaded, &original);
            assert_eq!(report.kube_version.as_deref(), Some("v1.34.4"), "{reader}");
        }
        // An odd value is no version, and no error either.
        let odd = b"apiVersion: v1\nkind: List\nkubeVersion: [1, 34]\nitems: []\n";
        let (_, report) = load_bytes(odd, Path::new("odd.yaml")).unwrap();
        assert_eq!(report.kube_version, None);
    }
}
