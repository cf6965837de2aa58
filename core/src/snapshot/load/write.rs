//! Writing [`ClusterObjects`] back as one `kind: List` document, JSON or YAML, in the shape
//! `kubectl get -o json|yaml` prints (what `kubectl sched snapshot` saves and the loaders read).

use std::collections::BTreeMap;
use std::io;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::kind::serialize_items;
use crate::snapshot::ClusterObjects;

/// Serializes as `{apiVersion: v1, kind: List, metadata: {resourceVersion: ""}, items: [...]}`, the
/// shape `kubectl get -o yaml|json` prints for several kinds.
pub struct ListView<'a>(pub &'a ClusterObjects);

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
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("apiVersion", "v1")?;
        map.serialize_entry("items", &ItemsView(self.0))?;
        map.serialize_entry("kind", "List")?;
        map.serialize_entry("metadata", &BTreeMap::from([("resourceVersion", "")]))?;
        map.end()
    }
}

/// Writes the objects as one YAML `kind: List` (what `kubectl sched snapshot` saves).
pub fn write_list_yaml<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), yaml_serde::Error> {
    yaml_serde::to_writer(writer, &ListView(objects))
}

/// Writes the objects as one JSON `kind: List`, indented like `kubectl get -o json`. Loading JSON is
/// several times faster than YAML, so prefer it for large clusters.
pub fn write_list_json<W: io::Write>(objects: &ClusterObjects, writer: W) -> Result<(), serde_json::Error> {
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(writer, formatter);
    ListView(objects).serialize(&mut ser)
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
    }
}
