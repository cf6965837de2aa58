//! ImageLocality: favours nodes that already have the pod's container images, weighted by image size
//! and by how widely the image is spread (an image on every node gives no node an edge).
//!
//! Image volumes (`volumes[].image.reference`) depend on the release: ignored up to v1.35, added to
//! the sum from v1.36 (`ReleaseChanges::image_locality_sums_image_volumes`) and also counted in the
//! threshold from v1.37 (`image_locality_counts_image_volumes`).

use std::sync::Arc;

use crate::framework::FeatureGates;
use crate::framework::cycle_state::CycleState;
use crate::framework::interface::{MAX_NODE_SCORE, Plugin, ScorePlugin};
use crate::framework::runtime::{Handle, PluginError};
use crate::framework::status::Status;
use crate::plugins::names;
use crate::snapshot::{ImageStateSummary, NodeInfo, PodInfo};

/// The plugin's registry name.
pub(crate) const NAME: &str = names::IMAGE_LOCALITY;

const MB: i64 = 1024 * 1024;
/// Below this sum of scaled image sizes a node scores 0 (small images pull quickly anyway).
pub(crate) const MIN_THRESHOLD: i64 = 23 * MB;
/// Per image (container, init container or image volume): the sum is capped at this times the count.
pub(crate) const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The ImageLocality plugin. It reads the snapshot's node count, so it keeps the handle.
#[derive(Debug)]
pub(crate) struct ImageLocality {
    handle: Handle,
    /// How the release treats image volumes.
    image_volumes: ImageVolumes,
}

/// What the release does with the pod's image volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ImageVolumes {
    /// Their images present on the node add to the sum (v1.36+).
    summed: bool,
    /// Each one raises the threshold like a container (v1.37+).
    counted: bool,
}

/// Go's `normalizedImageName`: an image without a tag (no `:` after the last `/`) means `:latest`,
/// which is how nodes report it. Digest references (`@sha256:…`) already contain a `:` and are kept.
pub(crate) fn normalized_image_name(name: &str) -> std::borrow::Cow<'_, str> {
    let last_colon = name.rfind(':');
    let last_slash = name.rfind('/');
    // Go compares LastIndex results, where "absent" is -1: no colon, or a colon before the last slash.
    let has_tag = match (last_colon, last_slash) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(c), Some(s)) => c > s,
    };
    if has_tag {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(format!("{name}:latest"))
    }
}

fn scaled_image_score(state: &ImageStateSummary, total_nodes: usize) -> i64 {
    let spread = state.num_nodes as f64 / total_nodes as f64;
    (state.size as f64 * spread) as i64
}

/// The scaled sizes of the pod's images present on the node, and how many images the threshold
/// counts, with image volumes as the release treats them.
fn sum_image_scores(
    pod: &PodInfo,
    node: &NodeInfo,
    total_nodes: usize,
    image_volumes: ImageVolumes,
) -> (i64, i64) {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return (0, 0);
    };
    let mut sum = 0i64;
    let mut count = 0i64;
    let mut add = |image: &str, summed: bool, counted: bool| {
        if summed && let Some(state) = node.image_states.get(normalized_image_name(image).as_ref()) {
            sum = sum.saturating_add(scaled_image_score(state, total_nodes));
        }
        if counted {
            count += 1;
        }
    };
    for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
        add(c.image.as_deref().unwrap_or(""), true, true);
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(image) = &v.image {
            add(
                image.reference.as_deref().unwrap_or(""),
                image_volumes.summed,
                image_volumes.counted,
            );
        }
    }
    (sum, count)
}

/// Clamps the sum to [MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD × count] and scales it to 0–100.
fn calculate_priority(sum: i64, image_count: i64) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD.saturating_mul(image_count);
    let clamped = if sum < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum > max_threshold {
        max_threshold
    } else {
        sum
    };
    let range = max_threshold - MIN_THRESHOLD;
    if range == 0 {
        return 0;
    }
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / range
}

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        NAME
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        // A node being scored is in the snapshot, so the count is at least 1 in practice.
        let total = self.handle.snapshot.nodes().len().max(1);
        let (sum, count) = sum_image_scores(pod, node, total, self.image_volumes);
        (calculate_priority(sum, count), Status::success())
    }
}

/// Builds the plugin (it takes no args).
pub(crate) fn new(
    _args: Option<&serde_json::Value>,
    handle: &Handle,
    features: &FeatureGates,
) -> Result<Arc<dyn Plugin>, PluginError> {
    Ok(Arc::new(ImageLocality {
        handle: handle.clone(),
        image_volumes: ImageVolumes {
            summed: features.changes.image_locality_sums_image_volumes,
            counted: features.changes.image_locality_counts_image_volumes,
        },
    }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ImageVolumeSource, Volume};

    use super::*;
    use crate::testing::{PodBuilder, node, pod, snapshot};

    #[test]
    fn image_names_are_normalized_like_go() {
        for (input, want) in [
            ("nginx", "nginx:latest"),
            ("nginx:1.27", "nginx:1.27"),
            ("gcr.io/app", "gcr.io/app:latest"),
            ("registry:5000/app", "registry:5000/app:latest"),
            ("registry:5000/app:v2", "registry:5000/app:v2"),
            ("app@sha256:0123", "app@sha256:0123"),
            ("", ":latest"),
        ] {
            assert_eq!(normalized_image_name(input), want, "{input}");
        }
    }

    fn with_images(images: &[&str]) -> PodBuilder {
        let mut b = pod("p").image(images[0]);
        for (i, image) in images.iter().enumerate().skip(1) {
            b = b.container(&format!("c{i}"), &[]).with(|p| {
                if let Some(c) = p.spec.as_mut().and_then(|s| s.containers.last_mut()) {
                    c.image = Some(image.to_string());
                }
            });
        }
        b
    }

    fn scores(p: PodBuilder, nodes: Vec<crate::testing::NodeBuilder>) -> Vec<i64> {
        scores_for(p, nodes, &crate::framework::FeatureGates::default())
    }

    fn scores_for(
        p: PodBuilder,
        nodes: Vec<crate::testing::NodeBuilder>,
        features: &crate::framework::FeatureGates,
    ) -> Vec<i64> {
        let snap = Arc::new(snapshot(nodes.into_iter().map(|n| n.obj()).collect(), vec![]));
        let pl = new(
            None,
            &Handle {
                snapshot: snap.clone(),
            },
            features,
        )
        .expect("no args");
        let scorer = pl.as_score().expect("score plugin");
        let p = p.info();
        snap.nodes()
            .iter()
            .map(|n| {
                let (score, s) = scorer.score(&CycleState::new(), &p, n);
                assert!(s.is_success());
                score
            })
            .collect()
    }

    #[test]
    fn score_by_size_and_spread() {
        let n1 = || {
            node("n1")
                .image(&["gcr.io/40:latest"], 40 * MB)
                .image(&["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB)
        };
        let n2 = || {
            node("n2")
                .image(&["gcr.io/250:latest"], 250 * MB)
                .image(&["gcr.io/10:v1"], 10 * MB)
        };
        let cases: Vec<(&str, PodBuilder, Vec<i64>)> = vec![
            // n1: 40MB × 1/2 = 20MB, under the 23MB floor → 0.
            // n2: 250MB × 1/2 = 125MB of 2000MB → 100 × (125 − 23) / (2000 − 23) = 5.
            (
                "small image is ignored",
                with_images(&["gcr.io/40", "gcr.io/250"]),
                vec![0, 5],
            ),
            // n1: 300MB × 1/2 = 150MB → 100 × (150 − 23) / (2000 − 23) = 6; n2: 10MB × 1/2 → 0.
            (
                "tags must match",
                with_images(&["gcr.io/300:v1", "gcr.io/10:v1"]),
                vec![6, 0],
            ),
            (
                "untagged means latest",
                with_images(&["gcr.io/300"]),
                vec![100 * (150 * MB - MIN_THRESHOLD) / (1000 * MB - MIN_THRESHOLD), 0],
            ),
            ("absent image", with_images(&["gcr.io/300:v9"]), vec![0, 0]),
        ];
        for (name, p, want) in cases {
            assert_eq!(scores(p, vec![n1(), n2()]), want, "{name}");
        }
    }

    #[test]
    fn an_image_on_every_node_counts_fully() {
        let nodes = vec![
            node("n1").image(&["big:latest"], 500 * MB),
            node("n2").image(&["big:latest"], 500 * MB),
        ];
        // 500MB × 2/2 → 100 × (500 − 23) / (1000 − 23) = 48.
        assert_eq!(scores(with_images(&["big"]), nodes), vec![48, 48]);
    }

    #[test]
    fn an_image_name_has_the_size_the_first_node_reported() {
        // kube-scheduler's cache keeps one state per image name, sized by the first node that listed
        // it; n2's larger report of the same name does not count. A name listed twice on one node
        // keeps its first entry too.
        let nodes = vec![
            node("n1").image(&["big:latest"], 500 * MB),
            node("n2")
                .image(&["big:latest"], 1500 * MB)
                .image(&["big:latest"], 1800 * MB),
        ];
        // 500MB × 2/2 → 100 × (500 − 23) / (1000 − 23) = 48 on both nodes.
        assert_eq!(scores(with_images(&["big"]), nodes), vec![48, 48]);
    }

    #[test]
    fn sum_is_capped_per_image() {
        let nodes = vec![node("n1").image(&["huge:latest"], 5000 * MB)];
        assert_eq!(scores(with_images(&["huge"]), nodes), vec![100]);
    }

    fn with_image_volume(p: PodBuilder, reference: &str) -> PodBuilder {
        p.volume(Volume {
            name: "data".into(),
            image: Some(ImageVolumeSource {
                reference: Some(reference.into()),
                pull_policy: None,
            }),
            ..Default::default()
        })
    }

    #[test]
    fn init_containers_and_image_volumes_count() {
        let nodes = vec![
            node("n1")
                .image(&["data:v1"], 300 * MB)
                .image(&["init:latest"], 500 * MB),
        ];
        let p = with_image_volume(pod("p"), "data:v1")
            .init_container("init", &[], false)
            .with(|p| {
                if let Some(c) = p
                    .spec
                    .as_mut()
                    .and_then(|s| s.init_containers.as_mut())
                    .and_then(|c| c.first_mut())
                {
                    c.image = Some("init".into());
                }
            });
        // Three images (container without image, init, volume): 800MB of 3000MB.
        let want = 100 * (800 * MB - MIN_THRESHOLD) / (3000 * MB - MIN_THRESHOLD);
        assert_eq!(want, 26);
        assert_eq!(scores(p, nodes), vec![want]);
    }

    /// An image volume per release: ignored up to v1.35; its image summed but the threshold that
    /// of the containers alone in v1.36; summed and counted from v1.37.
    #[test]
    fn image_volumes_follow_the_release() {
        use crate::features::{FeatureGates, KubeVersion};
        let nodes = || {
            vec![
                node("n1")
                    .image(&["data:v1"], 600 * MB)
                    .image(&["app:latest"], 300 * MB),
            ]
        };
        let p = || with_image_volume(pod("p").image("app"), "data:v1");
        let ignored = 100 * (300 * MB - MIN_THRESHOLD) / (1000 * MB - MIN_THRESHOLD);
        let summed = 100 * (900 * MB - MIN_THRESHOLD) / (1000 * MB - MIN_THRESHOLD);
        let counted = 100 * (900 * MB - MIN_THRESHOLD) / (2000 * MB - MIN_THRESHOLD);
        assert_eq!((ignored, summed, counted), (28, 89, 44));
        for (version, want) in [
            (KubeVersion::new(33, 13), ignored),
            (KubeVersion::new(35, 4), ignored),
            (KubeVersion::new(36, 3), summed),
            (KubeVersion::new(37, 1), counted),
        ] {
            assert_eq!(
                scores_for(p(), nodes(), &FeatureGates::for_version(version)),
                vec![want],
                "{version}"
            );
        }
    }
}
