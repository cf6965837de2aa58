//! The CEL environment DRA selectors compile in (the Kubernetes base environment at v1.37 plus
//! the `device` variable), and compilation: parse, macro expansion (`has`, `all`, `exists`,
//! `exists_one`, `map`, `filter`, `cel.bind`, `sortBy`), a light static check standing in for
//! cel-go's type checker, and cost instrumentation.
//!
//! The static check rejects what cel-go's checker would reject and a runtime could only report
//! later: unknown identifiers and functions (`undeclared reference to 'x'`), unknown `device`
//! fields (`undefined field 'x'`), struct literals, and results that are visibly not `bool`
//! (`must evaluate to bool or the unknown type, not int`). It is not a type checker: anything whose
//! type is only known at run time is left to evaluation.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators};
use cel::parser::{Macro, MacroExprHelper, ParseError, ParseErrors};
use cel::{DeclarationError, Env};

use super::{cost, lists, quantity, regex, semver, twovar};

/// The variable selectors see.
pub const DEVICE_VAR: &str = "device";

/// The fields of `device` (the `kubernetes.DRADevice` type of v1.37 with consumable capacity).
pub const DEVICE_FIELDS: [&str; 4] = ["driver", "attributes", "capacity", "allowMultipleAllocations"];

/// Parser recursion limit (cel-go's default is 250).
const MAX_RECURSION_DEPTH: u16 = 200;

/// Why the environment could not be built (a programming error: the declarations are fixed).
#[derive(Debug, Clone, thiserror::Error)]
pub enum EnvError {
    /// A declaration clashed with another.
    #[error("internal error building CEL environment: {0}")]
    Declaration(#[from] DeclarationError),
}

fn build() -> Result<Env, EnvError> {
    let mut env = Env::stdlib();
    env.set_error_on_duplicate_map_keys(true);
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    env.add_extension(quantity::extension)?;
    env.add_extension(semver::extension)?;
    env.add_extension(lists::extension)?;
    env.add_extension(lists::sets_extension)?;
    env.add_extension(regex::extension)?;
    env.add_extension(twovar::extension)?;
    env.add_extension(cost::extension)?;
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    Ok(env)
}

/// The shared environment; `None` if it could not be built (reported as a compile error).
pub static ENV: LazyLock<Result<Arc<Env>, EnvError>> = LazyLock::new(|| build().map(Arc::new));

/// `cel.bind(var, init, expr)` (cel-go's `ext.Bindings`): `expr` with `var` bound to `init`,
/// expanded as cel-go does into a comprehension over an empty list whose accumulator is `var`.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let var = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(name)) => name.clone(),
        _ => {
            let id = args.first().map_or(0, |a| a.id);
            return Err(helper.new_error(id, "cel.bind() variable names must be simple identifiers"));
        }
    };
    let result = args.pop().unwrap_or_default();
    let init = args.pop().unwrap_or_default();
    args.clear();
    target.take();
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var)),
        result,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

/// Functions and members an expression may call (besides operators), by name.
const FUNCTIONS: &[&str] = &[
    // standard library
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    // optional types
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "hasValue",
    "value",
    "orValue",
    "or",
    // ext.Strings
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "format",
    "strings.quote",
    // ext.Lists (lists.range is left out: it allocates its result before any cost is charged)
    "slice",
    "flatten",
    "distinct",
    "reverse",
    "sort",
    "@sortByAssociatedKeys",
    // ext.Sets
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    // Kubernetes lists, regex, quantity, semver
    "isSorted",
    "sum",
    "min",
    "max",
    "includes",
    "find",
    "findAll",
    "quantity",
    "isQuantity",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
];

/// Type names usable as values (`type(x) == int`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "duration",
    "timestamp",
    "dyn",
    "optional_type",
];

/// A static check failure, already worded as cel-go would.
type CheckResult = Result<(), String>;

struct Checker<'a> {
    functions: &'a HashSet<&'static str>,
    scope: Vec<String>,
}

static FUNCTION_SET: LazyLock<HashSet<&'static str>> = LazyLock::new(|| FUNCTIONS.iter().copied().collect());

impl Checker<'_> {
    fn bound(&self, name: &str) -> bool {
        self.scope.iter().any(|s| s == name)
    }

    fn check(&mut self, e: &IdedExpr) -> CheckResult {
        match &e.expr {
            Expr::Unspecified => Err("unspecified expression".to_string()),
            Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => {
                if self.bound(name) || name == DEVICE_VAR || TYPE_NAMES.contains(&name.as_str()) {
                    Ok(())
                } else {
                    Err(format!("undeclared reference to '{name}' (in container '')"))
                }
            }
            Expr::Select(s) => {
                if let Expr::Ident(name) = &s.operand.expr
                    && name == DEVICE_VAR
                    && !self.bound(name)
                    && !DEVICE_FIELDS.contains(&s.field.as_str())
                {
                    return Err(format!("undefined field '{}'", s.field));
                }
                self.check(&s.operand)
            }
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                let is_operator = name.starts_with('_')
                    || name.starts_with('@')
                    || name.starts_with('!')
                    || name.starts_with('-');
                if let Some(target) = &call.target {
                    let qualified = match &target.expr {
                        Expr::Ident(ns) if !self.bound(ns) => {
                            let q = format!("{ns}.{name}");
                            self.functions.contains(q.as_str())
                        }
                        _ => false,
                    };
                    if !qualified {
                        if !is_operator && !self.functions.contains(name) {
                            return Err(format!("undeclared reference to '{name}' (in container '')"));
                        }
                        self.check(target)?;
                    }
                } else if !is_operator && !self.functions.contains(name) {
                    return Err(format!("undeclared reference to '{name}' (in container '')"));
                }
                call.args.iter().try_for_each(|a| self.check(a))
            }
            Expr::List(l) => l.elements.iter().try_for_each(|a| self.check(a)),
            Expr::Map(m) => m.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => {
                    self.check(&me.key)?;
                    self.check(&me.value)
                }
                EntryExpr::StructField(_) => Err("unexpected struct field in map literal".to_string()),
            }),
            Expr::Struct(s) => Err(format!(
                "undeclared reference to '{}' (in container '')",
                s.type_name
            )),
            Expr::Comprehension(c) => {
                self.check(&c.iter_range)?;
                self.check(&c.accu_init)?;
                let depth = self.scope.len();
                self.scope.push(c.accu_var.clone());
                self.scope.push(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.scope.push(v.clone());
                }
                let r = self
                    .check(&c.loop_cond)
                    .and_then(|_| self.check(&c.loop_step))
                    .and_then(|_| self.check(&c.result));
                self.scope.truncate(depth);
                r
            }
        }
    }
}

/// The type `e` visibly has, when it is certainly not `bool`.
fn visible_non_bool_type(e: &IdedExpr) -> Option<String> {
    let literal = |l: &LiteralValue| match l {
        LiteralValue::Boolean(_) => None,
        LiteralValue::Bytes(_) => Some("bytes"),
        LiteralValue::Double(_) => Some("double"),
        LiteralValue::Int(_) => Some("int"),
        LiteralValue::Null => Some("null_type"),
        LiteralValue::String(_) => Some("string"),
        LiteralValue::UInt(_) => Some("uint"),
    };
    match &e.expr {
        Expr::Literal(l) => literal(l).map(str::to_string),
        Expr::List(l) => {
            let elem = match l.elements.first().map(|f| &f.expr) {
                Some(Expr::Literal(first)) => literal(first).unwrap_or("bool"),
                _ => "dyn",
            };
            Some(format!("list({elem})"))
        }
        Expr::Map(_) => Some("map(dyn, dyn)".to_string()),
        Expr::Call(call) => {
            let t = match call.func_name.as_str() {
                operators::ADD
                | operators::SUBSTRACT
                | operators::MULTIPLY
                | operators::DIVIDE
                | operators::MODULO
                | operators::NEGATE => {
                    return call.args.first().and_then(visible_non_bool_type);
                }
                "size" | "int" | "compareTo" | "asInteger" | "sign" | "major" | "minor" | "patch"
                | "indexOf" | "lastIndexOf" => "int",
                "string" | "find" | "charAt" | "lowerAscii" | "upperAscii" | "substring" | "trim"
                | "join" | "replace" | "format" => "string",
                "double" | "asApproximateFloat" => "double",
                "uint" => "uint",
                "quantity" | "add" | "sub" => "kubernetes.Quantity",
                "semver" => "kubernetes.Semver",
                "findAll" | "split" => "list(string)",
                _ => return None,
            };
            Some(t.to_string())
        }
        _ => None,
    }
}

/// The first parse error, on one line (the source snippet lines dropped), and how many followed.
fn parse_errors_text(errors: &ParseErrors) -> String {
    let text = errors.to_string();
    let mut lines = text.lines().filter(|l| !l.starts_with("| "));
    let first = lines.next().unwrap_or("syntax error").to_string();
    let more = lines.count();
    if more == 0 {
        first
    } else {
        format!("{first} (and {more} more errors)")
    }
}

/// A compiled selector: the instrumented AST to evaluate.
#[derive(Debug)]
pub struct Program {
    /// The expression with `@cost` metering.
    pub ast: IdedExpr,
    /// Stack evaluating it may need.
    pub eval_stack: usize,
}

/// `resourceapi.CELSelectorExpressionMaxLength`: the API server rejects longer selectors.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// Deepest AST accepted. The interpreter recurses once per level (more in macro expansions), so
/// this bounds the stack evaluation needs ([`Program::eval_stack`]).
pub const MAX_AST_DEPTH: usize = 200;

/// Stack compilation runs on: the generated ANTLR parser uses a lot of stack per nesting level,
/// far more than a caller's thread may have (a test thread has 2 MiB), so compilation switches to
/// a stack of this size (reserved, committed as used) when less is left.
const PARSER_STACK_SIZE: usize = 64 << 20;

/// Stack one level of the AST may need while evaluating (a debug build's interpreter frames are
/// several times a release build's).
const EVAL_STACK_PER_LEVEL: usize = if cfg!(debug_assertions) {
    64 << 10
} else {
    16 << 10
};

/// Depth of `e`'s tree.
fn depth(e: &IdedExpr) -> usize {
    let children: Vec<&IdedExpr> = match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(c.args.iter()).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::Select(s) => vec![&*s.operand],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|en| match &en.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        _ => Vec::new(),
    };
    1 + children.into_iter().map(depth).max().unwrap_or(0)
}

/// Compiles `expression`; the error is the compile error text.
pub fn compile(expression: &str) -> Result<Program, String> {
    if expression.len() > MAX_EXPRESSION_LENGTH {
        return Err(format!(
            "compilation failed: expression is longer than {MAX_EXPRESSION_LENGTH} bytes"
        ));
    }
    stacker::maybe_grow(PARSER_STACK_SIZE, PARSER_STACK_SIZE, || compile_here(expression))
}

fn compile_here(expression: &str) -> Result<Program, String> {
    let env = match &*ENV {
        Ok(env) => env,
        Err(e) => return Err(e.to_string()),
    };
    let parser = env.parser().max_recursion_depth(MAX_RECURSION_DEPTH);
    let ast = parser
        .parse(expression)
        .map_err(|e| format!("compilation failed: {}", parse_errors_text(&e)))?;
    if depth(&ast) > MAX_AST_DEPTH {
        return Err(format!(
            "compilation failed: expression nesting exceeds the maximum depth of {MAX_AST_DEPTH}"
        ));
    }
    let mut checker = Checker {
        functions: &FUNCTION_SET,
        scope: Vec::new(),
    };
    checker
        .check(&ast)
        .map_err(|e| format!("compilation failed: ERROR: <input>: {e}"))?;
    if let Some(t) = visible_non_bool_type(&ast) {
        return Err(format!("must evaluate to bool or the unknown type, not {t}"));
    }
    let ast = cost::instrument(ast);
    let eval_stack = (depth(&ast) + 8) * EVAL_STACK_PER_LEVEL;
    Ok(Program { ast, eval_stack })
}
