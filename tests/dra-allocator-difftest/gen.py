"""Random cases for the DRA allocator differential test (run.sh, `make dra-difftest`).

    gen.py OUTDIR START COUNT

writes OUTDIR/SEED.in.json for every seed in [START, START+COUNT): one node (node-1, zone=a), up to
three pools of ResourceSlices (node-local, node-selector, all-nodes, per-device node selection; shared
counters, taints, binding conditions, consumable capacity with request policies, incomplete pools,
duplicate devices, an older generation), two DeviceClasses (one with a CEL selector and config), one
to three claims (exactly / firstAvailable requests, ExactCount / All, CEL selectors, tolerations,
capacity requests, adminAccess, matchAttribute / distinctAttribute constraints, config) and already
allocated claims (exclusive, shared with consumed capacity, admin access). A case depends only on its
seed, so a differing case can be regenerated from its file name.
"""
import json, random, sys, os
DRV = "gpu.example.com"
NODE = "node-1"

def rnd_policy(r):
    k = r.random()
    if k < 0.4: return None
    if k < 0.7:
        return {"default": "1Gi", "validRange": {"min": "1Gi", "max": r.choice(["8Gi","16Gi"]), "step": r.choice(["1Gi","512Mi"])}}
    if k < 0.85:
        return {"validValues": ["2Gi", "4Gi", "8Gi"], "default": "2Gi"}
    return {"validRange": {"min": "100m", "step": "250m"}}

def device(r, name, counters):
    d = {"name": name, "attributes": {"model": {"string": r.choice(["a", "b"])}, "numa": {"int": r.randint(0, 2)}}}
    if r.random() < 0.15:
        d["taints"] = [{"key": "broken", "value": r.choice(["yes", "no"]), "effect": r.choice(["NoSchedule", "NoExecute", "None"])}]
    if r.random() < 0.08:
        d["bindingConditions"] = ["attached"]
        d["bindingFailureConditions"] = ["failed"]
        if r.random() < 0.5: d["bindsToNode"] = True
    if counters and r.random() < 0.6:
        d["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": r.choice(["4Gi", "8Gi", "2Gi"])}}}]
    if r.random() < 0.3:
        d["capacity"] = {"memory": {"value": r.choice(["8Gi", "16Gi", "10Gi"])}}
        p = rnd_policy(r)
        if p: d["capacity"]["memory"]["requestPolicy"] = p
        if r.random() < 0.6: d["allowMultipleAllocations"] = True
    return d

def selector(zone):
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]}

def gen_case(seed):
    r = random.Random(seed)
    slices = []
    npools = r.randint(1, 3)
    for p in range(npools):
        pool = f"pool-{r.choice('abcd')}{p}"
        nslices = r.randint(1, 2)
        generation = 1
        counters = r.random() < 0.3
        count = nslices + (1 if counters else 0)
        if r.random() < 0.05: count += 1  # incomplete
        kind = r.choice(["node", "node", "selector", "all", "perdevice"])
        for s in range(nslices):
            devs = [device(r, f"dev-{p}-{s}-{i}", counters) for i in range(r.randint(1, 4))]
            if r.random() < 0.02 and devs: devs.append(dict(devs[0]))  # duplicate
            spec = {"driver": DRV, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}, "devices": devs}
            k = kind
            if k == "node": spec["nodeName"] = r.choice([NODE, NODE, NODE, "node-2"])
            elif k == "selector": spec["nodeSelector"] = selector(r.choice(["a", "a", "b"]))
            elif k == "all": spec["allNodes"] = True
            else:
                spec["perDeviceNodeSelection"] = True
                for d in devs:
                    c = r.random()
                    if c < 0.4: d["nodeName"] = r.choice([NODE, "node-2"])
                    elif c < 0.7: d["allNodes"] = True
                    else: d["nodeSelector"] = selector(r.choice(["a", "b"]))
            slices.append({"metadata": {"name": f"slice-{r.choice('xyz')}-{p}-{s}"}, "spec": spec})
        if counters:
            spec = {"driver": DRV, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                    "sharedCounters": [{"name": "cs", "counters": {"mem": {"value": r.choice(["8Gi", "16Gi"])}}}]}
            if kind == "node": spec["nodeName"] = NODE
            elif kind == "selector": spec["nodeSelector"] = selector("a")
            else: spec["allNodes"] = True
            slices.append({"metadata": {"name": f"counters-{p}"}, "spec": spec})
        if r.random() < 0.1:
            # an older generation slice
            old = json.loads(json.dumps(slices[-1])); old["metadata"]["name"] += "-old"; old["spec"]["pool"]["generation"] = 0
            slices.append(old)
    classes = [{"metadata": {"name": "gpu"}, "spec": {}},
               {"metadata": {"name": "gpu-a"}, "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'a'"}}],
                 "config": [{"opaque": {"driver": DRV, "parameters": {"x": 1}}}]}}]
    def req_body(r):
        b = {"deviceClassName": r.choice(["gpu", "gpu", "gpu-a"])}
        if r.random() < 0.08:
            b["allocationMode"] = "All"
        else:
            b["allocationMode"] = "ExactCount"; b["count"] = r.choice([1, 1, 2, 3])
        if r.random() < 0.2:
            b["selectors"] = [{"cel": {"expression": f"device.attributes['gpu.example.com'].numa {r.choice(['==', '!=', '<='])} {r.randint(0,2)}"}}]
        if r.random() < 0.2:
            b["tolerations"] = [r.choice([{"key": "broken", "operator": "Exists"}, {"key": "broken", "operator": "Equal", "value": "yes"}, {"operator": "Exists", "effect": "NoSchedule"}])]
        if r.random() < 0.2:
            b["capacity"] = {"requests": {"memory": r.choice(["1Gi", "3Gi", "1500Mi", "6Gi", "300m"])}}
        return b
    claims = []
    for c in range(r.randint(1, 3)):
        reqs = []
        for q in range(r.randint(1, 2)):
            name = f"r{q}"
            if r.random() < 0.25:
                subs = []
                for si in range(r.randint(1, 3)):
                    b = req_body(r); b["name"] = f"s{si}"; subs.append(b)
                reqs.append({"name": name, "firstAvailable": subs})
            else:
                b = req_body(r)
                if r.random() < 0.1: b["adminAccess"] = True
                reqs.append({"name": name, "exactly": b})
        devices = {"requests": reqs}
        if r.random() < 0.3:
            names = [x["name"] for x in reqs]
            con = {r.choice(["matchAttribute", "distinctAttribute"]): "gpu.example.com/" + r.choice(["model", "numa"])}
            if r.random() < 0.5: con["requests"] = names[:1] if r.random() < 0.5 else names
            devices["constraints"] = [con]
        if r.random() < 0.2:
            devices["config"] = [{"requests": [reqs[0]["name"]], "opaque": {"driver": DRV, "parameters": {"y": 2}}}, {"opaque": {"driver": DRV, "parameters": {"z": 3}}}]
        claims.append({"metadata": {"name": f"claim-{c}", "namespace": "ns"}, "spec": {"devices": devices}})
    allocated = []
    alldevs = [(s["spec"]["pool"]["name"], d) for s in slices for d in s["spec"].get("devices", [])]
    for i, (pool, d) in enumerate(alldevs):
        if r.random() < 0.15:
            res = {"request": "x", "driver": DRV, "pool": pool, "device": d["name"]}
            if d.get("allowMultipleAllocations") and r.random() < 0.7:
                res["shareID"] = f"00000000-0000-0000-0000-{i:012d}"
                res["consumedCapacity"] = {"memory": r.choice(["2Gi", "4Gi", "7Gi"])}
            elif r.random() < 0.1:
                res["adminAccess"] = True
            allocated.append({"metadata": {"name": f"old-{i}", "namespace": "ns"}, "spec": {"devices": {"requests": []}},
                              "status": {"allocation": {"devices": {"results": [res]}}}})
    node = {"metadata": {"name": NODE, "labels": {"zone": "a"}}}
    return {"node": node, "slices": slices, "classes": classes, "claims": claims, "allocatedClaims": allocated}

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: gen.py OUTDIR START COUNT")
    out, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    for seed in range(start, start + n):
        with open(os.path.join(out, f"{seed:05d}.in.json"), "w") as f:
            json.dump(gen_case(seed), f)
