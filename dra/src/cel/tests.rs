//! Table-driven tests of the DRA CEL environment: `device_matches` on realistic devices, each
//! extension library (results and errors), compile errors, the cost limit, the cache, and a
//! garbage-input run that must not panic.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::*;

fn int(i: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(i),
        ..Default::default()
    }
}

fn boolean(b: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(b),
        ..Default::default()
    }
}

fn string(s: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(s.to_string()),
        ..Default::default()
    }
}

fn version(s: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(s.to_string()),
        ..Default::default()
    }
}

fn cap(q: &str) -> DeviceCapacity {
    DeviceCapacity {
        value: K8sQuantity(q.to_string()),
        ..Default::default()
    }
}

/// A GPU with qualified and unqualified attributes, list attributes and capacities.
struct Gpu {
    attributes: BTreeMap<String, DeviceAttribute>,
    capacity: BTreeMap<String, DeviceCapacity>,
}

fn gpu() -> Gpu {
    let mut attributes = BTreeMap::new();
    attributes.insert("gpu.example.com/model".to_string(), string("a100"));
    attributes.insert("gpu.example.com/index".to_string(), int(3));
    attributes.insert("gpu.example.com/mig".to_string(), boolean(true));
    attributes.insert("driverVersion".to_string(), version("1.2.3-rc.1"));
    attributes.insert("family".to_string(), string("ampere"));
    attributes.insert(
        "numa.example.com/nodes".to_string(),
        DeviceAttribute {
            ints: Some(vec![0, 1, 3]),
            ..Default::default()
        },
    );
    attributes.insert(
        "gpu.example.com/tags".to_string(),
        DeviceAttribute {
            strings: Some(vec!["fast".to_string(), "hbm".to_string()]),
            ..Default::default()
        },
    );
    attributes.insert(
        "gpu.example.com/flags".to_string(),
        DeviceAttribute {
            bools: Some(vec![true, false]),
            ..Default::default()
        },
    );
    attributes.insert(
        "gpu.example.com/firmware".to_string(),
        DeviceAttribute {
            versions: Some(vec!["1.0.0".to_string(), "2.1.0".to_string()]),
            ..Default::default()
        },
    );
    let mut capacity = BTreeMap::new();
    capacity.insert("memory".to_string(), cap("80Gi"));
    capacity.insert("gpu.example.com/cores".to_string(), cap("6912"));
    capacity.insert("power".to_string(), cap("400500m"));
    Gpu { attributes, capacity }
}

impl Gpu {
    fn device(&self) -> Device<'_> {
        Device {
            driver: "gpu.example.com",
            attributes: &self.attributes,
            capacity: &self.capacity,
            allow_multiple_allocations: None,
        }
    }
}

fn eval(expr: &str) -> Result<bool, CelError> {
    let g = gpu();
    CompilationResult::compile(expr).device_matches(&g.device())
}

#[derive(Debug)]
enum Want {
    Match(bool),
    /// A runtime error containing this text.
    Runtime(&'static str),
    /// A compile error containing this text.
    Compile(&'static str),
}

fn check(cases: &[(&str, Want)]) {
    let mut failures = Vec::new();
    for (expr, want) in cases {
        let got = eval(expr);
        let ok = match (want, &got) {
            (Want::Match(b), Ok(g)) => b == g,
            (Want::Runtime(t), Err(CelError::Runtime(e))) => e.contains(t),
            (Want::Compile(t), Err(CelError::Compile(e))) => e.contains(t),
            _ => false,
        };
        if !ok {
            failures.push(format!("{expr}\n    want {want:?}\n    got  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn device_matches_realistic_selectors() {
    use Want::*;
    check(&[
        ("true", Match(true)),
        ("false", Match(false)),
        (
            r#"device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100""#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].model == "h100""#,
            Match(false),
        ),
        (
            r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
            Match(true),
        ),
        (
            r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("80Gi"))"#,
            Match(false),
        ),
        (
            r#"device.capacity["gpu.example.com"].memory == quantity("85899345920")"#,
            Match(true),
        ),
        (
            r#"device.capacity["gpu.example.com"].power.isInteger()"#,
            Match(false),
        ),
        (
            r#"device.capacity["gpu.example.com"].cores.asInteger() == 6912"#,
            Match(true),
        ),
        // Unqualified names land in the driver's domain.
        (
            r#"device.attributes["gpu.example.com"].family == "ampere""#,
            Match(true),
        ),
        (r#"device.attributes["gpu.example.com"].index > 2"#, Match(true)),
        (r#"device.attributes["gpu.example.com"].mig"#, Match(true)),
        (
            r#"device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.2.3"))"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].driverVersion.major() == 1"#,
            Match(true),
        ),
        // List attributes.
        (r#"1 in device.attributes["numa.example.com"].nodes"#, Match(true)),
        (
            r#"2 in device.attributes["numa.example.com"].nodes"#,
            Match(false),
        ),
        (
            r#"device.attributes["numa.example.com"].nodes.includes(3)"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].tags.exists(t, t == "hbm")"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].flags.all(f, f)"#,
            Match(false),
        ),
        (
            r#"device.attributes["gpu.example.com"].firmware.exists(v, v.isGreaterThan(semver("2.0.0")))"#,
            Match(true),
        ),
        (
            r#"device.attributes["numa.example.com"].nodes.isSorted()"#,
            Match(true),
        ),
        (
            r#"device.attributes["numa.example.com"].nodes.sum() == 4"#,
            Match(true),
        ),
        // Domains: a missing one is an empty map, not an error.
        (r#""x" in device.attributes["other.com"]"#, Match(false)),
        (r#"size(device.attributes["other.com"]) == 0"#, Match(true)),
        (r#""gpu.example.com" in device.attributes"#, Match(true)),
        (r#""other.com" in device.attributes"#, Match(false)),
        (
            r#"device.capacity["gpu.example.com"].exists_one(x, x == "memory")"#,
            Match(true),
        ),
        (r#"size(device.attributes) == 2"#, Match(true)),
        (r#"device.allowMultipleAllocations"#, Match(false)),
        (r#"device.allowMultipleAllocations == false"#, Match(true)),
        // Missing ids are errors with the optional-chaining hint.
        (
            r#"device.attributes["gpu.example.com"].noSuchAttr == 1"#,
            Runtime(
                "no such key: noSuchAttr. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields",
            ),
        ),
        (
            r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
            Runtime("no such key: noSuchAttr"),
        ),
        (
            r#"has(device.attributes["gpu.example.com"].noSuchAttr)"#,
            Match(false),
        ),
        (r#"has(device.attributes["gpu.example.com"].model)"#, Match(true)),
        (
            r#"device.attributes["gpu.example.com"].?noSuchAttr.orValue(7) == 7"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].?model.hasValue()"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"][?"index"].orValue(0) == 3"#,
            Match(true),
        ),
        // cel.bind
        (
            r#"cel.bind(dra, device.attributes["gpu.example.com"], dra.mig && dra.model == "a100")"#,
            Match(true),
        ),
        (r#"cel.bind(x, 2, cel.bind(y, x * 3, y == 6))"#, Match(true)),
        // Result types.
        (
            r#"device.attributes["gpu.example.com"].model"#,
            Runtime("CEL result of type string could not be converted to bool"),
        ),
        (
            r#"device.attributes["numa.example.com"].nodes"#,
            Runtime("CEL result of type list could not be converted to bool"),
        ),
        // Runtime errors.
        (
            r#"device.attributes["gpu.example.com"].index / 0 == 1"#,
            Runtime("division by zero"),
        ),
        (
            r#"device.attributes["gpu.example.com"].index % 0 == 1"#,
            Runtime("modulus by zero"),
        ),
        (
            r#"device.attributes["gpu.example.com"].model + 1 == 1"#,
            Runtime("no such overload"),
        ),
        (
            r#"device.attributes["gpu.example.com"].model.isGreaterThan(quantity("1"))"#,
            Runtime("no such overload"),
        ),
        (
            r#"9223372036854775807 + device.attributes["gpu.example.com"].index > 0"#,
            Runtime("overflow"),
        ),
        (r#"[1, 2][5] == 1"#, Runtime("index out of range: 5")),
        (r#"{"a": 1}["b"] == 1"#, Runtime("no such key: b. consider using")),
        // Heterogeneous equality and cross-type numeric comparisons, as the base environment.
        (
            r#"device.attributes["gpu.example.com"].index == "3""#,
            Match(false),
        ),
        (
            r#"device.attributes["gpu.example.com"].index < 3.5 && 1u == 1"#,
            Match(true),
        ),
        (
            r#"type(device.attributes["gpu.example.com"].model) == string"#,
            Match(true),
        ),
        // `has` on a domain sees the default empty map, as upstream's Find wrapper.
        (r#"has(device.attributes.foo)"#, Match(true)),
        (
            r#"device.attributes.exists(d, d == "numa.example.com")"#,
            Match(true),
        ),
        // Errors absorbed by logical operators, as in cel-go.
        (
            r#"device.attributes["gpu.example.com"].missing || true"#,
            Match(true),
        ),
        (
            r#"false && device.attributes["gpu.example.com"].missing"#,
            Match(false),
        ),
    ]);
}

#[test]
fn compile_errors() {
    use Want::*;
    check(&[
        ("?!", Compile("Syntax error")),
        ("1", Compile("must evaluate to bool or the unknown type, not int")),
        (r#""abc""#, Compile("not string")),
        ("[1, 2]", Compile("not list(int)")),
        (r#"quantity("1")"#, Compile("not kubernetes.Quantity")),
        ("nosuchvar == 1", Compile("undeclared reference to 'nosuchvar'")),
        ("nosuchfunc(1)", Compile("undeclared reference to 'nosuchfunc'")),
        ("device.foo == 1", Compile("undefined field 'foo'")),
        ("[1].exists(x, y)", Compile("undeclared reference to 'y'")),
        ("lists.range(3).size() == 3", Compile("undeclared reference")),
        ("cel.bind(1, 2, true)", Compile("simple identifiers")),
        ("Foo{a: 1}", Compile("undeclared reference to 'Foo'")),
        ("device.attributes[", Compile("compilation failed")),
    ]);
    // A compile error is one line.
    let r = CompilationResult::compile("a +* b");
    let e = r.error.expect("compile error").to_string();
    assert!(!e.contains('\n'), "{e}");
    // Comprehension variables shadow nothing but are in scope.
    assert_eq!(eval("[1, 2].map(x, x * 2).exists(y, y == 4)"), Ok(true));
}

#[test]
fn quantity_library() {
    use Want::*;
    check(&[
        (r#"quantity("1Gi") == quantity("1073741824")"#, Match(true)),
        (r#"quantity("1") == quantity("1000m")"#, Match(true)),
        (r#"quantity("1") != quantity("1001m")"#, Match(true)),
        (r#"isQuantity("1.5Gi")"#, Match(true)),
        (r#"isQuantity("1.5 Gi")"#, Match(false)),
        (r#"isQuantity("")"#, Match(false)),
        (r#"sign(quantity("-3")) == -1"#, Match(true)),
        (r#"sign(quantity("0")) == 0"#, Match(true)),
        (r#"quantity("1500m").isInteger()"#, Match(false)),
        (r#"quantity("2k").asInteger() == 2000"#, Match(true)),
        (r#"quantity("1.5").asApproximateFloat() == 1.5"#, Match(true)),
        (
            r#"quantity("1Mi").add(quantity("1Mi")) == quantity("2Mi")"#,
            Match(true),
        ),
        (r#"quantity("1").add(2) == quantity("3")"#, Match(true)),
        (
            r#"quantity("1").sub(quantity("1500m")) == quantity("-500m")"#,
            Match(true),
        ),
        (r#"quantity("10").sub(3).asInteger() == 7"#, Match(true)),
        (r#"quantity("1G").isGreaterThan(quantity("1Gi"))"#, Match(false)),
        (r#"quantity("1G").isLessThan(quantity("1Gi"))"#, Match(true)),
        (r#"quantity("1Gi").compareTo(quantity("1G")) == 1"#, Match(true)),
        (
            r#"quantity("80Gi").compareTo(quantity("85899345920")) == 0"#,
            Match(true),
        ),
        (
            r#"quantity("1.5").asInteger() == 1"#,
            Runtime("cannot convert value to integer"),
        ),
        (
            r#"quantity("abc") == quantity("1")"#,
            Runtime("quantities must match the regular expression"),
        ),
        (
            r#"quantity("1ki") == quantity("1")"#,
            Runtime("unable to parse quantity's suffix"),
        ),
        (r#"quantity("1") < quantity("2")"#, Runtime("no such overload")),
        (
            r#"quantity("1").add("x") == quantity("1")"#,
            Runtime("no such overload"),
        ),
    ]);
}

#[test]
fn semver_library() {
    use Want::*;
    check(&[
        (r#"semver("1.2.3") == semver("1.2.3")"#, Match(true)),
        (r#"semver("1.2.3+build") == semver("1.2.3")"#, Match(true)),
        (r#"isSemver("1.2.3")"#, Match(true)),
        (r#"isSemver("v1.2.3")"#, Match(false)),
        (r#"isSemver("v1.2", true)"#, Match(true)),
        (r#"isSemver("v1.2", false)"#, Match(false)),
        (r#"semver("v1.2", true) == semver("1.2.0")"#, Match(true)),
        (r#"semver("1.2.3").major() == 1"#, Match(true)),
        (r#"semver("1.2.3").minor() == 2"#, Match(true)),
        (r#"semver("1.2.3").patch() == 3"#, Match(true)),
        (
            r#"semver("1.2.3").isGreaterThan(semver("1.2.3-rc.1"))"#,
            Match(true),
        ),
        (r#"semver("1.2.3").isLessThan(semver("1.10.0"))"#, Match(true)),
        (r#"semver("2.0.0").compareTo(semver("1.9.9")) == 1"#, Match(true)),
        (
            r#"semver("1.0.0-alpha").compareTo(semver("1.0.0-alpha.1")) == -1"#,
            Match(true),
        ),
        (
            r#"semver("1.2") == semver("1.2.0")"#,
            Runtime("No Major.Minor.Patch elements found"),
        ),
        (
            r#"semver("1.2.3").isGreaterThan(quantity("1"))"#,
            Runtime("no such overload"),
        ),
    ]);
    // A bad version attribute is reported as upstream does.
    let mut attributes = BTreeMap::new();
    attributes.insert("v".to_string(), version("1.2"));
    let capacity = BTreeMap::new();
    let device = Device {
        driver: "d.example.com",
        attributes: &attributes,
        capacity: &capacity,
        allow_multiple_allocations: Some(true),
    };
    assert_eq!(
        CompilationResult::compile("true").device_matches(&device),
        Err(CelError::Runtime(
            "attribute v: parse semantic version: No Major.Minor.Patch elements found".into()
        ))
    );
    let mut unsupported = BTreeMap::new();
    unsupported.insert("v".to_string(), DeviceAttribute::default());
    let device = Device {
        attributes: &unsupported,
        ..device
    };
    assert_eq!(
        CompilationResult::compile("true").device_matches(&device),
        Err(CelError::Runtime(
            "attribute v: unsupported attribute value".into()
        ))
    );
}

#[test]
fn strings_lists_regex_and_sets() {
    use Want::*;
    check(&[
        // ext.Strings
        (r#""hello".charAt(1) == "e""#, Match(true)),
        (r#""hello".indexOf("l") == 2"#, Match(true)),
        (r#""hello".lastIndexOf("l") == 3"#, Match(true)),
        (r#""HeLLo".lowerAscii() == "hello""#, Match(true)),
        (r#""hello".upperAscii() == "HELLO""#, Match(true)),
        (r#""a-b-c".replace("-", "+") == "a+b+c""#, Match(true)),
        (r#""a,b,c".split(",") == ["a", "b", "c"]"#, Match(true)),
        (r#""hello".substring(1, 3) == "el""#, Match(true)),
        (r#""  x ".trim() == "x""#, Match(true)),
        (r#"["a", "b"].join("/") == "a/b""#, Match(true)),
        (r#"strings.quote("a\"b") == "\"a\\\"b\"""#, Match(true)),
        (r#""%s-%d".format(["a", 1]) == "a-1""#, Match(true)),
        (r#""hello".substring(10) == """#, Runtime("index out of range")),
        // standard library odds and ends
        (
            r#""gpu-a100".startsWith("gpu") && "a100".matches("^a[0-9]+$")"#,
            Match(true),
        ),
        (
            r#"size("abc") == 3 && int("7") == 7 && string(7) == "7""#,
            Match(true),
        ),
        // Kubernetes lists
        ("[1, 2, 2, 3].isSorted()", Match(true)),
        ("[2.0, 1.0].isSorted()", Match(false)),
        ("[].isSorted()", Match(true)),
        ("[1, 3].sum() == 4", Match(true)),
        ("[1.5, 2.5].sum() == 4.0", Match(true)),
        ("[].sum() == 0", Match(true)),
        ("[3, 1, 2].min() == 1", Match(true)),
        (r#"["b", "c", "a"].max() == "c""#, Match(true)),
        ("[].min() == 1", Runtime("min called on empty list")),
        ("[1, 2, 1].indexOf(1) == 0", Match(true)),
        ("[1, 2, 1].lastIndexOf(1) == 2", Match(true)),
        ("[1, 2].indexOf(5) == -1", Match(true)),
        ("[1, 2].includes(2)", Match(true)),
        ("5.includes(5)", Match(true)),
        // ext.Lists as the crate provides it
        ("[3, 1, 2].sort() == [1, 2, 3]", Match(true)),
        ("[[1], [2, 3]].flatten() == [1, 2, 3]", Match(true)),
        ("[1, 2, 3, 4].slice(1, 3) == [2, 3]", Match(true)),
        // regex
        (r#""abc123def456".find("[0-9]+") == "123""#, Match(true)),
        (r#""abc".find("[0-9]+") == """#, Match(true)),
        (r#""a1b2c3".findAll("[0-9]") == ["1", "2", "3"]"#, Match(true)),
        (r#""a1b2c3".findAll("[0-9]", 2) == ["1", "2"]"#, Match(true)),
        (r#""a".find("(") == """#, Runtime("error parsing regexp")),
        // ext.Sets
        ("sets.contains([1, 2, 3], [1, 3])", Match(true)),
        ("sets.contains([1, 2], [4])", Match(false)),
        ("sets.equivalent([1, 2], [2, 1, 1])", Match(true)),
        ("sets.intersects([1, 2], [3, 2])", Match(true)),
        ("sets.intersects([1], [])", Match(false)),
        // two-variable comprehensions
        (
            r#"device.attributes["gpu.example.com"].all(k, v, k != "")"#,
            Match(true),
        ),
        (
            r#"device.attributes["gpu.example.com"].exists(k, v, k == "model" && v == "a100")"#,
            Match(true),
        ),
        (r#"{"a": 1, "b": 2}.existsOne(k, v, v > 1)"#, Match(true)),
        ("[10, 20, 30].all(i, v, v == (i + 1) * 10)", Match(true)),
        ("[10, 20, 30].exists(i, v, i == 5)", Match(false)),
        ("[1, 2, 3].transformList(i, v, i * v) == [0, 2, 6]", Match(true)),
        ("[1, 2, 3].transformList(i, v, v > 1, v) == [2, 3]", Match(true)),
        (
            r#"{"a": 1, "b": 2}.transformMap(k, v, v * 10) == {"a": 10, "b": 20}"#,
            Match(true),
        ),
        (
            r#"{"a": 1, "b": 2}.transformMap(k, v, v > 1, v) == {"b": 2}"#,
            Match(true),
        ),
        (
            "[1].all(x, x, true)",
            Compile("second variable must be different"),
        ),
        ("[1].all(1, x, true)", Compile("simple identifiers")),
        ("1.all(i, v, true)", Runtime("expected iterable")),
        // optional values
        ("optional.of(1).hasValue()", Match(true)),
        ("optional.of(2).optMap(x, x * 2).value() == 4", Match(true)),
        (
            "optional.none().optFlatMap(x, optional.of(x)).hasValue()",
            Match(false),
        ),
        ("optional.none().orValue(2) == 2", Match(true)),
        (r#"{"a": 1}.?b.orValue(5) == 5"#, Match(true)),
    ]);
}

#[test]
fn cost_limit() {
    let expensive = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))";
    assert_eq!(
        eval(expensive),
        Err(CelError::Runtime(cost::COST_LIMIT_EXCEEDED.into()))
    );
    // Doubling a string through nested binds: exponential size from a short expression.
    let mut doubling = String::from("cel.bind(s0, \"0123456789\", ");
    for i in 1..40 {
        doubling.push_str(&format!("cel.bind(s{i}, s{p} + s{p}, ", p = i - 1));
    }
    doubling.push_str("size(s39) > 0");
    doubling.push_str(&")".repeat(40));
    assert_eq!(
        eval(&doubling),
        Err(CelError::Runtime(cost::COST_LIMIT_EXCEEDED.into()))
    );
    // Nested map/filter over a list that grows.
    let nested = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(c, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(d, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(f, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].filter(e, e > d)))))).size() > 0";
    assert_eq!(
        eval(nested),
        Err(CelError::Runtime(cost::COST_LIMIT_EXCEEDED.into()))
    );
    // An error absorbed by `||` still reports the exceeded limit.
    let ten = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
    let absorbed = format!(
        "{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, {ten}.all(e, {ten}.all(f, a * f > 0)))))) || true"
    );
    assert_eq!(
        eval(&absorbed),
        Err(CelError::Runtime(cost::COST_LIMIT_EXCEEDED.into()))
    );
    // Ordinary selectors, even with a couple of comprehensions, stay well below.
    assert_eq!(
        eval(
            r#"device.attributes["gpu.example.com"].tags.all(t, ["fast", "hbm", "x"].exists(u, u == t)) && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#
        ),
        Ok(true)
    );
    assert_eq!(
        eval("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, x * y <= 100))"),
        Ok(true)
    );
    // The limit is configurable, and the meter counts.
    let g = gpu();
    let small = CompilationResult::compile_with_cost_limit("[1, 2, 3].all(x, x > 0)", 3);
    assert_eq!(
        small.device_matches(&g.device()),
        Err(CelError::Runtime(cost::COST_LIMIT_EXCEEDED.into()))
    );
    let meter = cost::Meter::start(100);
    assert_eq!(meter.used(), 0);
    assert!(!meter.exceeded());
}

#[test]
fn cache_is_bounded_lru_and_keeps_only_successes() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Cache>();
    assert_send_sync::<CompilationResult>();

    let cache = Cache::new(2);
    let a = cache.get_or_compile("true");
    assert!(a.error.is_none());
    assert!(Arc::ptr_eq(&a, &cache.get_or_compile("true")));
    let bad = cache.get_or_compile("?!");
    assert!(matches!(bad.error, Some(CelError::Compile(_))));
    assert_eq!(cache.len(), 1, "failed compilations are not cached");
    cache.get_or_compile("false");
    cache.get_or_compile("true"); // most recently used
    cache.get_or_compile("1 == 1"); // evicts "false"
    assert_eq!(cache.len(), 2);
    assert!(Arc::ptr_eq(&a, &cache.get_or_compile("true")));
    // Concurrent callers compile a new expression once and share the result.
    let shared = Cache::new(8);
    let results: Vec<Arc<CompilationResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| shared.get_or_compile("[1, 2].all(x, x > 0)")))
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert!(results.iter().all(|r| Arc::ptr_eq(r, &results[0])));
    let none = Cache::new(0);
    none.get_or_compile("true");
    assert!(none.is_empty());
    // A failed compilation reports its error from device_matches too.
    let g = gpu();
    assert!(matches!(
        bad.device_matches(&g.device()),
        Err(CelError::Compile(_))
    ));
}

/// A tiny deterministic generator (xorshift) for garbage expressions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[test]
fn garbage_does_not_panic() {
    let tokens = [
        "device",
        ".",
        "attributes",
        "capacity",
        "driver",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        "\"gpu.example.com\"",
        "\"x\"",
        "1",
        "0",
        "-1",
        "1.5",
        "2u",
        "b\"x\"",
        "+",
        "-",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        ">=",
        "&&",
        "||",
        "!",
        "?",
        ":",
        ",",
        "in",
        "has",
        "all",
        "exists",
        "map",
        "filter",
        "x",
        "cel.bind",
        "quantity",
        "semver",
        "isGreaterThan",
        "compareTo",
        "sum",
        "min",
        "find",
        "findAll",
        "size",
        "?.",
        ".?",
        "orValue",
        "optional.none()",
        "null",
        "true",
        "false",
        "'\\u00ff'",
        "\"\\xff\"",
        "@cost",
        "model",
        "memory",
        "dyn",
        "type",
        "int",
        "lists.range(5)",
        "sortBy",
        "format",
        "join",
        "split",
        "charAt",
        "substring",
        "9223372036854775807",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let g = gpu();
    for _ in 0..400 {
        let len = 1 + rng.next() % 14;
        let expr: Vec<&str> = (0..len).map(|_| rng.pick(&tokens)).collect();
        let expr = expr.join(" ");
        let r = CompilationResult::compile(&expr);
        let _ = r.device_matches(&g.device());
    }
    // Byte-level garbage too.
    for _ in 0..200 {
        let len = rng.next() % 40;
        let bytes: Vec<u8> = (0..len).map(|_| (rng.next() % 128) as u8).collect();
        let expr = String::from_utf8_lossy(&bytes).into_owned();
        let r = CompilationResult::compile(&expr);
        let _ = r.device_matches(&g.device());
    }
    // Deep nesting.
    for depth in [50usize, 200, 1000, 5000] {
        let expr = format!("{}true{}", "(".repeat(depth), ")".repeat(depth));
        let r = CompilationResult::compile(&expr);
        let _ = r.device_matches(&g.device());
        let expr = format!("{}true", "!".repeat(depth));
        let _ = CompilationResult::compile(&expr).device_matches(&g.device());
        let expr = format!("{}1]", "[".repeat(depth));
        let _ = CompilationResult::compile(&expr).device_matches(&g.device());
    }
}

#[test]
fn nesting_depths_compile_and_evaluate_without_overflow() {
    let g = gpu();
    for depth in [20usize, 40, 60, 63, 64, 65, 100, 200, 1000, 5000] {
        for (name, expr) in [
            ("paren", format!("{}true{}", "(".repeat(depth), ")".repeat(depth))),
            ("not", format!("{}true", "!".repeat(depth))),
            ("list", format!("{}1{}", "[".repeat(depth), "]".repeat(depth))),
            ("or", vec!["true"; depth].join(" || ")),
            ("plus", format!("{} == 0", vec!["1"; depth].join(" + "))),
        ] {
            let r = CompilationResult::compile(&expr);
            let got = r.device_matches(&g.device());
            if depth <= 64 && name != "list" {
                assert!(got.is_ok(), "{name} {depth}: {got:?}");
            }
            if let Some(e) = &r.error {
                assert!(!e.to_string().contains('\n'), "{name} {depth}: {e}");
            }
        }
    }
}

#[test]
fn allow_multiple_allocations_and_driver_domain() {
    let attributes = BTreeMap::from([
        ("model".to_string(), string("x")),
        ("other.example.com/model".to_string(), string("y")),
    ]);
    let capacity = BTreeMap::from([("slots".to_string(), cap("4"))]);
    let device = Device {
        driver: "nic.example.com",
        attributes: &attributes,
        capacity: &capacity,
        allow_multiple_allocations: Some(true),
    };
    let cases = [
        ("device.allowMultipleAllocations", true),
        (r#"device.attributes["nic.example.com"].model == "x""#, true),
        (r#"device.attributes["other.example.com"].model == "y""#, true),
        (
            r#"device.capacity["nic.example.com"].slots.asInteger() == 4"#,
            true,
        ),
        (r#"device.driver.endsWith(".example.com")"#, true),
    ];
    for (expr, want) in cases {
        assert_eq!(
            CompilationResult::compile(expr).device_matches(&device),
            Ok(want),
            "{expr}"
        );
    }
}

#[test]
fn edge_cases_fail_cleanly() {
    let cases = [
        r#""abc".substring(-5) == """#,
        r#""abc".substring(2, 1) == """#,
        r#""abc".charAt(99) == """#,
        r#""abc".charAt(-1) == """#,
        r#""a,b".split(",", -1).size() == 2"#,
        r#""a,b".split(",", 0).size() == 0"#,
        r#""a1".findAll("[0-9]", -1).size() == 1"#,
        r#""x".indexOf("", 99) == 0"#,
        r#""x".lastIndexOf("x", -3) == 0"#,
        r#""%d".format(["x"]) == """#,
        r#""%s %s".format(["x"]) == """#,
        r#""%.999999999f".format([1.0]) == """#,
        r#""x".replace("", "yy", 3) == """#,
        "-9223372036854775808 / -1 == 0",
        "-9223372036854775808 % -1 == 0",
        "9223372036854775807 * 2 == 0",
        "-(-9223372036854775808) == 0",
        "18446744073709551615u + 1u == 0u",
        "int(1e300) == 0",
        "uint(-1) == 0u",
        "[].max() == 0",
        "[1, 'a'].sum() == 0",
        "[1, 'a'].isSorted()",
        "[1, 'a'].sort() == []",
        "[1, 2].slice(2, 1) == []",
        "[[1]].flatten(-1) == []",
        r#"semver("99999999999999999999.0.0").major() == 0"#,
        r#"quantity("99999999999999999999999999999999999999999") == quantity("1")"#,
        r#"quantity("1e99999999999999999999") == quantity("1")"#,
        r#"quantity("9223372036854775807").add(9223372036854775807).isInteger()"#,
        r#"quantity("8Ei").asInteger() > 0"#,
        r#"{1: 2, 1: 3}.size() == 1"#,
        r#"{[1]: 2}.size() == 1"#,
        r#"optional.none().value() == 1"#,
        r#"device.attributes[1] == {}"#,
        r#"device.attributes[null] == {}"#,
        r#"device.attributes["gpu.example.com"][1] == 1"#,
        r#"timestamp("not a time") == timestamp("2020-01-01T00:00:00Z")"#,
        r#"duration("999999999999999999h") > duration("1s")"#,
        r#"bytes("\xff").size() == 1"#,
        r#"string(b"\xff") == """#,
        r#"type(device) == map"#,
        r#"device == device"#,
        r#"device.attributes == device.attributes"#,
        r#"cel.bind(device, 1, device == 1)"#,
        r#"[1, 2].map(x, [x].map(x, x)).size() == 2"#,
        r#"{"a": 1}.all(k, k == "a")"#,
        r#"[1,2,3].exists_one(x, x > 5)"#,
    ];
    let g = gpu();
    for expr in cases {
        let r = CompilationResult::compile(expr);
        let got = r.device_matches(&g.device());
        if let Err(e) = &got {
            let text = e.to_string();
            assert!(!text.contains("internal error"), "{expr}: {text}");
            assert!(!text.is_empty(), "{expr}");
        }
    }
}
