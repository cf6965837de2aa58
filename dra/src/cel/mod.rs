//! DRA's CEL environment: device selectors (`DeviceClass.spec.selectors[].cel.expression`,
//! `ResourceClaim.spec.devices.requests[].exactly.selectors[]`) compiled once and evaluated against
//! one device at a time, as `k8s.io/dynamic-resource-allocation/cel` does.
//!
//! Parsing and evaluation use the `cel` crate (cel-rust); this module adds what Kubernetes
//! selectors use on top of standard CEL:
//!
//! - the `device` variable ([`device`]): `device.driver`, `device.attributes` and
//!   `device.capacity` (`map domain → map id → value`; unqualified names use the driver as domain;
//!   a missing domain is an empty map, a missing id the runtime error `no such key: <id>`),
//!   `device.allowMultipleAllocations`;
//! - the Kubernetes quantity ([`quantity`]), semver ([`semver`]), lists and `ext.Sets`
//!   ([`lists`]) and regex ([`regex`]) libraries;
//! - cel-go's `ext.Strings` (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`,
//!   `replace`, `split`, `substring`, `trim`, `join`, `format`, `strings.quote`) and `ext.Lists`
//!   (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`) as the crate provides them;
//! - two-variable comprehensions ([`twovar`]: `all`, `exists`, `existsOne`, `transformList`,
//!   `transformMap` with `k, v`);
//! - `cel.bind(var, init, expr)` ([`mod@env`]), optional syntax (`a.?b`, `a[?k]`, `optional.of`,
//!   `optional.none`, `hasValue`, `value`, `orValue`, `or`, `optMap`, `optFlatMap`) as the crate
//!   provides it;
//! - the runtime cost limit `CELSelectorExpressionMaxCost` ([`cost`]), metered approximately;
//! - upstream's error texts where users see them: `no such key: <k>` with `EnhanceRuntimeError`'s
//!   hint, `CEL result of type <t> could not be converted to bool`, cel-go's cost limit text.
//!
//! Differences from cel-go and the Kubernetes CEL environment:
//!
//! - not supported (compile error `undeclared reference to ...`): `lists.range` (it allocates
//!   before any cost can be charged), `transformMapEntry`, `ext.Lists`' `first`/`last`, the URL,
//!   IP, CIDR, named-`format`, authz and JSON-patch libraries, `math.*`, struct literals;
//! - no type checker: compile time rejects unknown identifiers, functions and `device` fields and
//!   visibly non-`bool` results; other type errors (e.g. `quantity("1") < quantity("2")`,
//!   `device.attributes["d"].model + 1`) are runtime `no such overload` errors instead of compile
//!   errors. Compile errors are one line of our own wording, not cel-go's checker output;
//! - string `reverse()` (cel-go `ext.Strings` v3; the base environment has v2) is accepted;
//! - the cost limit is metered approximately ([`cost`]): the units differ from cel-go's, so an
//!   expression near the limit may be accepted by one and rejected by the other;
//! - quantities are exact only within about ±1.7e29 (out-of-range ones fail to parse);
//! - expressions longer than `CELSelectorExpressionMaxLength` (10 KiB) or nested deeper than
//!   [`env::MAX_AST_DEPTH`] fail to compile (the API server rejects the former too);
//! - runtime error texts follow cel-go for `no such key`, `no such overload` (followed by the
//!   crate's detail), `division by zero`, `modulus by zero`, `integer overflow`, `index out of
//!   range`, the cost limit and the bool conversion; other texts are the crate's;
//! - `Cache::new(0)` caches nothing (upstream's `lru.New(0)` is unbounded).

pub mod cost;
pub mod device;
pub mod env;
pub mod lists;
pub mod quantity;
pub mod regex;
pub mod semver;
pub mod twovar;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use ::cel::common::types::CelBool;
use ::cel::{Context, ExecutionError, Value};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

/// One device as a selector sees it (`cel.Device` upstream).
#[derive(Debug, Clone, Copy)]
pub struct Device<'a> {
    /// `device.driver`; also the default domain of unqualified attribute and capacity names.
    pub driver: &'a str,
    /// The device's attributes by (possibly domain-qualified) name.
    pub attributes: &'a BTreeMap<String, DeviceAttribute>,
    /// The device's capacities by (possibly domain-qualified) name.
    pub capacity: &'a BTreeMap<String, DeviceCapacity>,
    /// `device.allowMultipleAllocations` (false when unset).
    pub allow_multiple_allocations: Option<bool>,
}

/// Why a selector could not be compiled or evaluated. The `Display` text is what kube-scheduler's
/// error text carries after `CEL compile error: ` / `CEL runtime error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile (syntax, unknown identifier, wrong result type).
    #[error("{0}")]
    Compile(String),
    /// Evaluation failed (no such key, type mismatch, overflow, cost limit exceeded).
    #[error("{0}")]
    Runtime(String),
}

impl CelError {
    /// The text without v0.37's `EnhanceRuntimeError` hint, as dynamic-resource-allocation
    /// v0.34–v0.36 word it (they have no `cel/errors.go`).
    pub fn without_hint(&self) -> &str {
        let (CelError::Compile(text) | CelError::Runtime(text)) = self;
        text.strip_suffix(NO_SUCH_KEY_HINT).unwrap_or(text)
    }
}

/// A compiled selector (`cel.CompilationResult`): `error` is set when compilation failed.
#[derive(Debug)]
pub struct CompilationResult {
    /// The expression as written.
    pub expression: String,
    /// Why it did not compile, if it did not.
    pub error: Option<CelError>,
    program: Option<env::Program>,
    cost_limit: u64,
}

/// `EnhanceRuntimeError`'s hint after a `no such key` error.
const NO_SUCH_KEY_HINT: &str = ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields";

/// A runtime error as cel-go words it.
fn runtime_text(e: &ExecutionError) -> String {
    let text = match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(o) => format!("no such overload: {o}"),
        ExecutionError::UnsupportedBinaryOperator(op, l, r) => {
            format!(
                "no such overload: found no matching overload for '{op}' applied to '({}, {})'",
                l.type_of(),
                r.type_of()
            )
        }
        ExecutionError::ValuesNotComparable(l, r) => format!(
            "no such overload: {} and {} are not comparable",
            l.type_of(),
            r.type_of()
        ),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::UndeclaredReference(n) => format!("undeclared reference to '{n}'"),
        ExecutionError::UnexpectedType { got, want } => {
            format!("got '{got}', expected {want} type")
        }
        ExecutionError::IndexOutOfBounds(Value::Int(i)) => format!("index out of range: {i}"),
        ExecutionError::IndexOutOfBounds(Value::UInt(i)) => format!("index out of range: {i}"),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of range: {i:?}"),
        other => other.to_string(),
    };
    if text.contains("no such key:") {
        format!("{text}{NO_SUCH_KEY_HINT}")
    } else {
        text
    }
}

impl CompilationResult {
    /// Compiles `expression` (`CompileCELExpression` with the default cost limit).
    pub fn compile(expression: &str) -> Self {
        Self::compile_with_cost_limit(expression, cost::CEL_SELECTOR_EXPRESSION_MAX_COST)
    }

    /// Compiles `expression` with another runtime cost limit (`Options.CostLimit`).
    pub fn compile_with_cost_limit(expression: &str, cost_limit: u64) -> Self {
        let compiled = catch_unwind(|| env::compile(expression))
            .unwrap_or_else(|_| Err("compilation failed: internal error".to_string()));
        let (program, error) = match compiled {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(CelError::Compile(e))),
        };
        CompilationResult {
            expression: expression.to_string(),
            error,
            program,
            cost_limit,
        }
    }

    /// Evaluates the selector against `device` (`DeviceMatches`).
    pub fn device_matches(&self, device: &Device<'_>) -> Result<bool, CelError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let Some(program) = &self.program else {
            return Err(CelError::Compile("not compiled".to_string()));
        };
        let env = match &*env::ENV {
            Ok(env) => env.clone(),
            Err(e) => return Err(CelError::Compile(e.to_string())),
        };
        let value = device::device_value(device).map_err(|e| CelError::Runtime(e.to_string()))?;
        let stack = program.eval_stack;
        let evaluated = catch_unwind(AssertUnwindSafe(|| {
            stacker::maybe_grow(stack, stack, || evaluate(program, env, value, self.cost_limit))
        }));
        match evaluated {
            Ok(Ok(b)) => Ok(b),
            Ok(Err(e)) => Err(CelError::Runtime(e)),
            Err(_) => Err(CelError::Runtime(
                "CEL evaluation failed: internal error".to_string(),
            )),
        }
    }
}

/// Evaluates `program` with `device` as the `device` variable, metering its cost.
fn evaluate(
    program: &env::Program,
    env: Arc<::cel::Env>,
    device: ::cel::common::types::CelMap<'static>,
    cost_limit: u64,
) -> Result<bool, String> {
    {
        {
            let meter = cost::Meter::start(cost_limit);
            let mut ctx = Context::with_env(env);
            ctx.add_variable_as_val(env::DEVICE_VAR, Box::new(device));
            let result = Value::resolve_val(&program.ast, &ctx);
            match result {
                _ if meter.exceeded() => Err(cost::COST_LIMIT_EXCEEDED.to_string()),
                Err(e) => Err(runtime_text(&e)),
                Ok(v) => match v.downcast_ref::<CelBool>() {
                    Some(b) => Ok(*b.inner()),
                    None => Err(format!(
                        "CEL result of type {} could not be converted to bool: type conversion error from '{}' to 'bool'",
                        v.get_type().name(),
                        v.get_type().name()
                    )),
                },
            }
        }
    }
}

/// Bounded least-recently-used map of successful compilations.
#[derive(Debug, Default)]
struct Lru {
    entries: HashMap<String, (Arc<CompilationResult>, u64)>,
    order: BTreeMap<u64, String>,
    tick: u64,
}

/// Compiled selectors by expression (`cel.Cache`), shared by every node's allocation.
///
/// Only successful compilations are kept (as upstream), at most `max_entries` of them, the least
/// recently used evicted first; `max_entries == 0` caches nothing. Compilations of one expression
/// are serialised (through a small set of hashed locks, as upstream's `keymutex.NewHashed`), so
/// concurrent callers compile it once.
#[derive(Debug, Default)]
pub struct Cache {
    max_entries: usize,
    lru: Mutex<Lru>,
    /// Serialises compilations of one expression (`keymutex.NewHashed`): a hashed set of locks.
    compile_locks: [Mutex<()>; COMPILE_LOCKS],
}

/// Number of hashed compile locks.
const COMPILE_LOCKS: usize = 16;

impl Cache {
    /// A cache holding at most `max_entries` compiled expressions.
    pub fn new(max_entries: usize) -> Self {
        Cache {
            max_entries,
            ..Cache::default()
        }
    }

    /// The compiled form of `expression`, compiling it on first use (`GetOrCompile`).
    pub fn get_or_compile(&self, expression: &str) -> Arc<CompilationResult> {
        if let Some(hit) = self.get(expression) {
            return hit;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        expression.hash(&mut hasher);
        let lock = &self.compile_locks[(hasher.finish() % COMPILE_LOCKS as u64) as usize];
        let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = self.get(expression) {
            return hit;
        }
        let compiled = Arc::new(CompilationResult::compile(expression));
        if compiled.error.is_none() && self.max_entries > 0 {
            self.add(expression, compiled.clone());
        }
        compiled
    }

    /// Number of cached compilations.
    pub fn len(&self) -> usize {
        self.lru.lock().map_or(0, |l| l.entries.len())
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, expression: &str) -> Option<Arc<CompilationResult>> {
        let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        let Lru { entries, order, tick } = &mut *lru;
        let (result, used) = entries.get_mut(expression)?;
        order.remove(used);
        *tick += 1;
        *used = *tick;
        order.insert(*tick, expression.to_string());
        Some(result.clone())
    }

    fn add(&self, expression: &str, result: Arc<CompilationResult>) {
        let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        let Lru { entries, order, tick } = &mut *lru;
        *tick += 1;
        if let Some((_, old)) = entries.insert(expression.to_string(), (result, *tick)) {
            order.remove(&old);
        }
        order.insert(*tick, expression.to_string());
        while entries.len() > self.max_entries {
            let Some((_, oldest)) = order.pop_first() else {
                break;
            };
            entries.remove(&oldest);
        }
    }
}
