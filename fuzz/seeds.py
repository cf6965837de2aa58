#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz corpora (fuzz/corpus/<target>/seed-*) from the repository's
examples and test fixtures: snapshot files (YAML and the same objects as JSON), the
KubeSchedulerConfiguration documents embedded in the Rust sources and docs, the quantity and selector
strings of the unit tests, and AdmissionReviews for each request kind the webhook handles.

Run from the repository root: `python3 fuzz/seeds.py` (needs PyYAML). Seeds are named by content hash,
so running it again adds nothing that is already there. The fuzzer's own finds are merged in by
`make fuzz` and minimized with `cargo fuzz cmin`."""

import hashlib
import json
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    (directory / name).write_bytes(data)


def rust_strings(text):
    """String literals of a Rust file: raw strings verbatim, plain ones unescaped."""
    for m in re.finditer(r'r(#*)"(.*?)"\1', text, re.S):
        yield m.group(2)
    for m in re.finditer(r'(?<![r#\w])"((?:[^"\\]|\\.)*)"', text, re.S):
        s = re.sub(r"\\\n\s*", "", m.group(1))
        s = s.replace("\\n", "\n").replace('\\"', '"').replace("\\t", "\t").replace("\\\\", "\\")
        yield s


def rust_sources():
    for path in sorted(ROOT.glob("*/src/**/*.rs")) + sorted(ROOT.glob("*/tests/**/*.rs")):
        if "target" not in path.parts:
            yield path, path.read_text(errors="replace")


def snapshots():
    files = sorted((ROOT / "examples").glob("*.yaml")) + sorted(ROOT.glob("*/tests/fixtures/*.yaml"))
    for path in files:
        text = path.read_text()
        if len(text) > 64 * 1024:
            continue
        write("snapshot_load", text)
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        # The same objects as JSON (the loader's other path): one List, and each document alone.
        write("snapshot_load", json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        for d in docs[:4]:
            write("snapshot_load", json.dumps(d, indent=1))
    write("snapshot_load", '{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"p"}}]}')
    write("snapshot_load", "---\nkind: Node\napiVersion: v1\nmetadata: {name: n}\n---\n")


HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

# Arguments of the in-tree plugins that take any, as the upstream docs show them.
PLUGIN_ARGS = """profiles:
- schedulerName: default-scheduler
  percentageOfNodesToScore: 50
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 2}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 2, ignorePreferredTermsOfExistingPods: true}
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: zone, operator: In, values: [a]}]
  - name: DefaultPreemption
    args: {minCandidateNodesPercentage: 10, minCandidateNodesAbsolute: 100}
  - name: VolumeBinding
    args: {bindTimeoutSeconds: 600}
  plugins:
    score:
      enabled: [{name: NodeResourcesBalancedAllocation, weight: 3}]
      disabled: [{name: ImageLocality}]
"""


def scheduler_configs():
    write("scheduler_config", HEADER + PLUGIN_ARGS)
    write("scheduler_config", json.dumps(yaml.safe_load(HEADER + PLUGIN_ARGS)))
    for _, text in rust_sources():
        for s in rust_strings(text):
            if "kubescheduler.config.k8s.io" in s and "\n" in s:
                write("scheduler_config", s)
            elif s.startswith("profiles:") or ("pluginConfig" in s and "\n" in s):
                write("scheduler_config", HEADER + s)
    for md in sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]:
        for block in re.findall(r"```ya?ml\n(.*?)```", md.read_text(), re.S):
            if "KubeSchedulerConfiguration" in block:
                write("scheduler_config", block)


def quantities():
    resource = (ROOT / "apimachinery/src/resource.rs").read_text()
    tests = resource[resource.find("#[cfg(test)]"):]
    found = set(re.findall(r'"([^"\n]{1,40})"', tests))
    found |= {"500m", "1Gi", "1e3", "-1", "+1.5", "0.001", "1E", "100E", "1e-50", "-1e-50", ".5", "5."}
    for s in sorted(found):
        if re.fullmatch(r"[-+0-9.eEinumkKMGTP]+", s):
            write("quantity", s)


def selectors():
    labels = (ROOT / "apimachinery/src/labels.rs").read_text()
    tests = labels[labels.find("#[cfg(test)]"):]
    for s in set(re.findall(r'\("([^"\n]*)", (?:true|false)\)', tests)) | set(re.findall(r'"([^"\n]*[=!(][^"\n]*)"', tests)):
        write("label_selector", s)
    for s in ["", "app=web,tier!=db", "env in (prod,staging),!canary", "k notin (a,b)", "a==b"]:
        write("label_selector", s)
    write("label_selector", json.dumps({"matchLabels": {"app": "web"},
                                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}))
    write("label_selector", json.dumps({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "cpu", "operator": "Gt", "values": ["4"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}))


def review(uid, resource, obj, sub="", operation="CREATE", namespace="ns", name=""):
    request = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": resource},
               "namespace": namespace, "operation": operation, "userInfo": {"username": "u"}}
    if sub:
        request["subResource"] = sub
    if name:
        request["name"] = name
    if obj is not None:
        request["object"] = obj
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def admission_reviews():
    def pod(name, claims=(), node=None, annotations=None, ns=None):
        spec = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}],
                "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]}
        if node:
            spec["nodeName"] = node
        meta = {"name": name}
        if annotations is not None:
            meta["annotations"] = annotations
        if ns:
            meta["namespace"] = ns
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    opt = {"kubectl-sched.dev/prebind": "admission"}
    write("admission_review", review("u1", "pods", pod("plain")))
    write("admission_review", review("u2", "pods", pod("on-a", ["c1"], "node-a")))
    write("admission_review", review("u3", "pods", pod("on-b", ["c1", "c2"], "node-b")))
    write("admission_review", review("u4", "pods", pod("dyn", ["d1"], "node-a", annotations={})))
    write("admission_review", review("u5", "pods", pod("bound", ["b1"], "node-a")))
    write("admission_review", review("u6", "pods", pod("missing", ["nope"], "node-a")))
    write("admission_review", review("u7", "pods", pod("optin", ["c1"], annotations=opt)))
    write("admission_review", review("u8", "pods", pod("optns", ["c1", "d1"]), namespace="opt"))
    write("admission_review", review("u9", "pods", pod("unknown-node", ["c1"], "node-z")))
    eph = pod("eph", node="node-a")
    eph["spec"]["volumes"] = [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "dyn"}}}}]
    write("admission_review", review("u10", "pods", eph))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    write("admission_review", review("u11", "pods", binding, sub="binding", name="p"))
    binding["target"]["name"] = "node-b"
    write("admission_review", review("u12", "pods", binding, sub="binding", name="p", namespace="opt"))
    write("admission_review", review("u13", "pods", binding, sub="binding", name="nominated"))
    write("admission_review", review("u14", "pods", pod("upd"), operation="UPDATE"))
    write("admission_review", review("u15", "configmaps", {"kind": "ConfigMap"}))
    write("admission_review", review("u16", "pods", None))
    write("admission_review", review("", "pods", pod("nouid")))
    write("admission_review", '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}')


def main():
    snapshots()
    scheduler_configs()
    quantities()
    selectors()
    admission_reviews()
    for target in sorted(CORPUS.iterdir()):
        print(f"{target.name}: {len(list(target.iterdir()))} files", file=sys.stderr)


if __name__ == "__main__":
    main()
