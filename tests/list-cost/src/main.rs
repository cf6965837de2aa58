//! Decode cost of one pods list, protobuf (k8s-pb, prost) against JSON (serde_json into k8s-openapi,
//! and parsing alone), one thread, best of 3: `list-decode-cost PODS.json PODS.pb` with the bodies
//! `listcost.sh` saves. A measurement tool (see BENCHMARKS.md), not part of the build.
use prost::Message;
use std::time::Instant;

fn best<T>(f: impl Fn() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..3 {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.unwrap())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [json, pb] = [0, 1].map(|i| {
        let path = args.get(i).expect("usage: list-decode-cost PODS.json PODS.pb");
        std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    });
    assert_eq!(&pb[..4], b"k8s\0");
    let (t_pb, n_pb) = best(|| {
        let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&pb[4..]).unwrap();
        let list = k8s_pb::api::core::v1::PodList::decode(unknown.raw.as_deref().unwrap()).unwrap();
        list.items.len()
    });
    println!(
        "protobuf: {} MB, {} pods, {:.2} s ({:.0} MB/s)",
        pb.len() / 1_000_000,
        n_pb,
        t_pb,
        pb.len() as f64 / 1e6 / t_pb
    );
    let (t_js, n_js) = best(|| {
        let list: k8s_openapi::List<k8s_openapi::api::core::v1::Pod> = serde_json::from_slice(&json).unwrap();
        list.items.len()
    });
    println!(
        "json (k8s-openapi, every field): {} MB, {} pods, {:.2} s ({:.0} MB/s)",
        json.len() / 1_000_000,
        n_js,
        t_js,
        json.len() as f64 / 1e6 / t_js
    );
    let (t_skip, n_skip) = best(|| {
        let v: serde::de::IgnoredAny = serde_json::from_slice(&json).unwrap();
        let _ = v;
        0usize
    });
    println!(
        "json parse only (IgnoredAny): {:.2} s ({:.0} MB/s) {n_skip}",
        t_skip,
        json.len() as f64 / 1e6 / t_skip
    );
}
