//! NodeVolumeLimits tables: counting against CSINode limits (pods' volumes, migrated in-tree volumes,
//! VolumeAttachments), errors and skips, drivers that must be installed.

use super::*;
use crate::framework::status::Code;
use crate::snapshot::ClusterObjects;
use crate::testing::{csi_driver, csi_node, node, pod, pv, pvc, snapshot_of, storage_class};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, AzureDiskVolumeSource, EphemeralVolumeSource,
};

const DRIVER: &str = "csi.example.com";

fn ebs_volume(name: &str, id: &str) -> Volume {
    Volume {
        name: name.into(),
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: id.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn base_objects() -> ClusterObjects {
    ClusterObjects {
        nodes: vec![
            node("limited").obj(),
            node("no-csinode").obj(),
            node("unlimited").obj(),
        ],
        csi_nodes: vec![
            csi_node("limited", &[(DRIVER, Some(2)), ("ebs.csi.aws.com", Some(1))]),
            csi_node("unlimited", &[(DRIVER, None)]),
        ],
        persistent_volumes: (1..=4)
            .map(|i| pv(&format!("pv{i}")).csi(DRIVER, &format!("h{i}")).obj())
            .chain([pv("pv-ebs")
                .with(|p| {
                    p.spec
                        .get_or_insert_with(Default::default)
                        .aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
                        volume_id: "aws://us-east-1a/vol-1".into(),
                        ..Default::default()
                    })
                })
                .obj()])
            .collect(),
        persistent_volume_claims: (1..=4)
            .map(|i| pvc(&format!("c{i}")).volume_name(&format!("pv{i}")).obj())
            .chain([
                pvc("c-ebs").volume_name("pv-ebs").obj(),
                pvc("unbound").storage_class("sc").obj(),
                pvc("unbound2").storage_class("sc").obj(),
                pvc("unbound-no-class").obj(),
                pvc("p-scratch")
                    .storage_class("sc")
                    .owned_by_pod("p", "default-p")
                    .obj(),
                pvc("q-scratch").owned_by_pod("other", "uid-other").obj(),
            ])
            .collect(),
        storage_classes: vec![storage_class("sc", DRIVER, "WaitForFirstConsumer")],
        ..Default::default()
    }
}

fn run(objects: ClusterObjects, p: &PodInfo, node_name: &str) -> Status {
    run_with(objects, p, node_name, &FeatureGates::v1_37())
}

fn run_with(objects: ClusterObjects, p: &PodInfo, node_name: &str, features: &FeatureGates) -> Status {
    let snapshot = Arc::new(snapshot_of(objects));
    let plugin = new(
        None,
        &Handle {
            snapshot: snapshot.clone(),
        },
        features,
    )
    .unwrap();
    let mut state = CycleState::new();
    let (_, s) = plugin
        .as_pre_filter()
        .unwrap()
        .pre_filter(&mut state, p, snapshot.nodes());
    if !s.is_success() {
        return s;
    }
    plugin
        .as_filter()
        .unwrap()
        .filter(&state, p, snapshot.node(node_name).unwrap())
}

fn with_pods(pods: Vec<Pod>) -> ClusterObjects {
    ClusterObjects {
        pods,
        ..base_objects()
    }
}

#[test]
fn counts_against_csinode_limits() {
    let two_existing = vec![
        pod("e1").node("limited").pvc("c1").obj(),
        pod("e2").node("limited").pvc("c2").obj(),
    ];
    let cases: Vec<(&str, ClusterObjects, PodInfo, &str, Code)> = vec![
        (
            "under the limit",
            with_pods(vec![pod("e1").node("limited").pvc("c1").obj()]),
            pod("p").pvc("c2").info(),
            "limited",
            Code::Success,
        ),
        (
            "over the limit",
            with_pods(two_existing.clone()),
            pod("p").pvc("c3").info(),
            "limited",
            Code::Unschedulable,
        ),
        (
            "two new volumes over the limit",
            base_objects(),
            pod("p").pvc("c1").pvc("c2").pvc("c3").info(),
            "limited",
            Code::Unschedulable,
        ),
        (
            "shared volume counts once",
            with_pods(two_existing.clone()),
            pod("p").pvc("c1").info(),
            "limited",
            Code::Success,
        ),
        (
            "same PV through two claims counts once",
            base_objects(),
            pod("p").pvc("c1").pvc("c1").pvc("c2").info(),
            "limited",
            Code::Success,
        ),
        (
            "no CSINode: no limit",
            with_pods(two_existing.clone()),
            pod("p").pvc("c3").info(),
            "no-csinode",
            Code::Success,
        ),
        (
            "driver without count: no limit",
            base_objects(),
            pod("p").pvc("c1").pvc("c2").pvc("c3").info(),
            "unlimited",
            Code::Success,
        ),
        (
            "unbound claims count by class provisioner",
            with_pods(two_existing.clone()),
            pod("p").pvc("unbound").info(),
            "limited",
            Code::Unschedulable,
        ),
        (
            "unbound claim without class is not counted",
            with_pods(two_existing.clone()),
            pod("p").pvc("unbound-no-class").info(),
            "limited",
            Code::Success,
        ),
        (
            "existing pod with a missing claim is skipped",
            with_pods(vec![
                pod("e1").node("limited").pvc("c1").obj(),
                pod("e2").node("limited").pvc("gone").obj(),
            ]),
            pod("p").pvc("c2").info(),
            "limited",
            Code::Success,
        ),
        (
            "migrated in-tree PV counts under its CSI driver",
            with_pods(vec![
                pod("e1").node("limited").volume(ebs_volume("v", "vol-1")).obj(),
            ]),
            pod("p").pvc("c-ebs").info(),
            "limited",
            Code::Success,
        ),
        (
            "inline EBS volumes count against the EBS limit",
            with_pods(vec![
                pod("e1").node("limited").volume(ebs_volume("v", "vol-2")).obj(),
            ]),
            pod("p").volume(ebs_volume("w", "aws://us-east-1a/vol-1")).info(),
            "limited",
            Code::Unschedulable,
        ),
        (
            "generic ephemeral volume counts by its claim's class",
            with_pods(two_existing.clone()),
            pod("p")
                .volume(Volume {
                    name: "scratch".into(),
                    ephemeral: Some(EphemeralVolumeSource::default()),
                    ..Default::default()
                })
                .info(),
            "limited",
            Code::Unschedulable,
        ),
    ];
    for (name, objects, p, node_name, code) in cases {
        let s = run(objects, &p, node_name);
        assert_eq!(s.code(), code, "{name}: {s:?}");
        if code == Code::Unschedulable {
            assert_eq!(s.reasons(), [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED], "{name}");
        }
    }
}

#[test]
fn errors_and_skips() {
    let p_none = pod("p").info();
    assert_eq!(run(base_objects(), &p_none, "limited").code(), Code::Skip);
    let host_path_only = pod("p")
        .volume(Volume {
            name: "h".into(),
            host_path: Some(Default::default()),
            ..Default::default()
        })
        .info();
    assert_eq!(run(base_objects(), &host_path_only, "limited").code(), Code::Skip);

    // A missing claim of the new pod is reported by Filter, on every node.
    for n in ["limited", "no-csinode"] {
        let s = run(base_objects(), &pod("p").pvc("gone").info(), n);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "looking up PVC default/gone: persistentvolumeclaim \"gone\" not found"
        );
    }

    // An ephemeral claim owned by someone else.
    let q = pod("q")
        .volume(Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        })
        .info();
    let s = run(base_objects(), &q, "limited");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "PVC default/q-scratch was not created for pod default/q (pod is not owner)"
    );

    // An inline Azure disk of kind Shared cannot be migrated: an error where migration is on only.
    let azure = pod("p")
        .volume(Volume {
            name: "az".into(),
            azure_disk: Some(AzureDiskVolumeSource {
                disk_uri: "uri".into(),
                kind: Some("Shared".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
        .info();
    let s = run(base_objects(), &azure, "limited");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "converting volume(az) from inline to csi: kind(Shared) is not supported in csi migration"
    );
    assert!(run(base_objects(), &azure, "no-csinode").is_success());

    let bad_ebs = pod("p").volume(ebs_volume("w", "aws://zone/notavol")).info();
    assert_eq!(
        run(base_objects(), &bad_ebs, "limited").message(),
        "converting volume(w) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://zone/notavol)"
    );
}

#[test]
fn driver_must_be_installed_when_required() {
    let on = FeatureGates::v1_37();
    let off = FeatureGates {
        volume_limit_scaling: false,
        ..on
    };
    for (prevent, node_name, features, want) in [
        (
            Some(true),
            "no-csinode",
            on,
            Some(driver_not_installed_reason(DRIVER)),
        ),
        (Some(true), "limited", on, None),
        (Some(false), "no-csinode", on, None),
        (None, "no-csinode", on, None),
        // Without VolumeLimitScaling the driver's wish is not checked.
        (Some(true), "no-csinode", off, None),
    ] {
        let mut objects = base_objects();
        objects.csi_drivers = vec![csi_driver(DRIVER, prevent)];
        let s = run_with(objects, &pod("p").pvc("c1").info(), node_name, &features);
        match want {
            Some(reason) => {
                assert_eq!(s.code(), Code::Unschedulable);
                assert_eq!(s.reasons(), [reason]);
            }
            None => assert!(s.is_success(), "{prevent:?} {node_name}: {s:?}"),
        }
    }
    assert_eq!(
        driver_not_installed_reason("x.io"),
        "x.io CSI driver is not installed on the node"
    );
}

/// `VolumeLimitScaling` by release default: v1.35 and v1.36 (alpha, off) do not check that the
/// driver is installed; v1.37 (beta, on) rejects a node without it.
#[test]
fn driver_check_follows_the_release_default() {
    use crate::features::KubeVersion;
    for (version, want) in [
        (KubeVersion::new(35, 4), None),
        (KubeVersion::new(36, 3), None),
        (KubeVersion::new(37, 1), Some(driver_not_installed_reason(DRIVER))),
    ] {
        let mut objects = base_objects();
        objects.csi_drivers = vec![csi_driver(DRIVER, Some(true))];
        let s = run_with(
            objects,
            &pod("p").pvc("c1").info(),
            "no-csinode",
            &FeatureGates::for_version(version),
        );
        match want {
            Some(reason) => {
                assert_eq!(s.code(), Code::Unschedulable, "{version}");
                assert_eq!(s.reasons(), [reason], "{version}");
            }
            None => assert!(s.is_success(), "{version}: {s:?}"),
        }
    }
}

/// `DRIVER` allows 2 volumes on "limited". Each case adds VolumeAttachments to `base_objects`, puts
/// `pods` on the node and schedules `p`, built so that counting an attachment once more or once less
/// than upstream changes the answer; `without` is the answer without the attachments.
#[test]
fn counts_volume_attachments() {
    use crate::testing::volume_attachment;
    use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeError as AttachError};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    let va = |name: &str, pv_name: &str| volume_attachment(name, DRIVER, "limited", Some(pv_name));
    let detached = {
        let mut a = va("detached", "pv3");
        a.status = Some(k8s_openapi::api::storage::v1::VolumeAttachmentStatus {
            attached: false,
            attach_error: Some(AttachError {
                message: Some("rpc error".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        a
    };
    let deleting = {
        let mut a = va("deleting", "pv3");
        a.metadata.deletion_timestamp = Some(Time(Default::default()));
        a.metadata.finalizers = Some(vec!["external-attacher/csi-example-com".into()]);
        a
    };
    let other_driver_pv = pv("pv-other").csi("other.example.com", "h-other").obj();
    let e1 = || vec![pod("e1").node("limited").pvc("c1").obj()];

    struct Case {
        name: &'static str,
        attachments: Vec<VolumeAttachment>,
        pods: Vec<Pod>,
        new_pod: PodInfo,
        want: Code,
        without: Code,
    }
    let cases = [
        Case {
            name: "an attachment no pod uses counts",
            attachments: vec![va("a3", "pv3")],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Unschedulable,
            without: Code::Success,
        },
        Case {
            name: "an attachment of a volume a pod on the node uses counts once",
            attachments: vec![va("a1", "pv1")],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "two attachments of one volume count once",
            attachments: vec![va("a3", "pv3"), va("a3-again", "pv3")],
            pods: vec![],
            new_pod: pod("p").pvc("c1").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "the new pod's own volume, still attached, counts as attached and as new",
            attachments: vec![va("a1", "pv1")],
            pods: vec![],
            new_pod: pod("p").pvc("c1").pvc("c2").info(),
            want: Code::Unschedulable,
            without: Code::Success,
        },
        Case {
            name: "an attachment by another driver counts for that driver",
            attachments: vec![volume_attachment(
                "a3",
                "other.example.com",
                "limited",
                Some("pv3"),
            )],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "the attacher names the driver, not the PV",
            attachments: vec![va("a-other", "pv-other")],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Unschedulable,
            without: Code::Success,
        },
        Case {
            name: "an attachment to another node does not count here",
            attachments: vec![volume_attachment("a3", DRIVER, "unlimited", Some("pv3"))],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "a detached attachment (attach error) still counts",
            attachments: vec![detached],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Unschedulable,
            without: Code::Success,
        },
        Case {
            name: "an attachment being deleted still counts",
            attachments: vec![deleting],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Unschedulable,
            without: Code::Success,
        },
        Case {
            name: "an attachment without attacher is skipped",
            attachments: vec![volume_attachment("a3", "", "limited", Some("pv3"))],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "an inline volume attachment (no PV name) is skipped",
            attachments: vec![volume_attachment("inline", DRIVER, "limited", None)],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            name: "an attachment of a missing PV is skipped",
            attachments: vec![va("gone", "pv-gone")],
            pods: e1(),
            new_pod: pod("p").pvc("c2").info(),
            want: Code::Success,
            without: Code::Success,
        },
        Case {
            // EBS allows 1 on "limited": the attached in-tree PV is not translated, so not counted.
            name: "an attachment of an in-tree PV is skipped",
            attachments: vec![volume_attachment(
                "ebs",
                "ebs.csi.aws.com",
                "limited",
                Some("pv-ebs"),
            )],
            pods: vec![],
            new_pod: pod("p").volume(ebs_volume("w", "vol-9")).info(),
            want: Code::Success,
            without: Code::Success,
        },
    ];
    for c in cases {
        let objects = |attachments: Vec<VolumeAttachment>| {
            let mut o = with_pods(c.pods.clone());
            o.persistent_volumes.push(other_driver_pv.clone());
            o.volume_attachments = attachments;
            o
        };
        let s = run(objects(c.attachments.clone()), &c.new_pod, "limited");
        assert_eq!(s.code(), c.want, "{}: {s:?}", c.name);
        if c.want == Code::Unschedulable {
            assert_eq!(s.reasons(), [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED], "{}", c.name);
        }
        let s = run(objects(Vec::new()), &c.new_pod, "limited");
        assert_eq!(s.code(), c.without, "{} (without attachments): {s:?}", c.name);
    }
}
