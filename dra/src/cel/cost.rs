//! The runtime cost limit (`resourceapi.CELSelectorExpressionMaxCost`) for an interpreter that
//! cannot meter cost itself.
//!
//! At compile time [`instrument`] wraps every call and comprehension of the AST in a call to the
//! internal function `@cost` (an identifier no CEL source can spell), and every non-constant loop
//! condition too, so it runs once per iteration. At run time `@cost` charges the evaluation's
//! budget (a thread-local meter armed by [`Meter::start`]) 1 unit plus 1 per 10 elements, bytes or
//! entries of the value it passes through, the way cel-go charges calls, list and string building
//! by size; list and map literals are charged cel-go's base costs (10 and 30) the same way. Once
//! the budget is spent it fails with cel-go's text
//! `operation cancelled: actual cost limit exceeded`, which stops loops at their next condition.
//!
//! This is an approximation of cel-go's cost tracker, not a copy: the units differ in detail (cel-go
//! also charges variable and field accesses, and string functions by input size), but anything
//! whose cost grows with nested iteration or with the size of built values hits the limit in the
//! same order of magnitude, and ordinary selectors stay far below it. Charging happens after a
//! call returns, so a single call is bounded by its (charged) inputs rather than up front.

use std::cell::Cell;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::common::types::{CelBytes, CelInt, CelString, DYN_TYPE, INT_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// `resourceapi.CELSelectorExpressionMaxCost`.
pub const CEL_SELECTOR_EXPRESSION_MAX_COST: u64 = 1_000_000;

/// cel-go's error when the runtime cost limit is exceeded.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The internal metering function's name.
pub const COST_FN: &str = "@cost";

/// Why metering stopped an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    /// The evaluation's budget is spent.
    #[error("operation cancelled: actual cost limit exceeded")]
    LimitExceeded,
}

#[derive(Clone, Copy)]
struct State {
    used: u64,
    limit: u64,
    exceeded: bool,
}

thread_local! {
    static METER: Cell<Option<State>> = const { Cell::new(None) };
}

/// The budget of one evaluation on this thread; dropping it disarms the meter.
pub struct Meter {
    previous: Option<State>,
}

impl Meter {
    /// Arms the meter with `limit` units for the evaluation that follows.
    pub fn start(limit: u64) -> Meter {
        let previous = METER.with(|m| {
            m.replace(Some(State {
                used: 0,
                limit,
                exceeded: false,
            }))
        });
        Meter { previous }
    }

    /// Whether the evaluation so far went over its limit.
    pub fn exceeded(&self) -> bool {
        METER.with(|m| m.get().is_some_and(|s| s.exceeded))
    }

    /// Units charged so far.
    pub fn used(&self) -> u64 {
        METER.with(|m| m.get().map_or(0, |s| s.used))
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        METER.with(|m| m.set(self.previous));
    }
}

/// What passing `value` through `@cost` costs.
fn cost_of(value: &dyn Val) -> u64 {
    let size = if let Some(s) = value.downcast_ref::<CelString<'_>>() {
        s.inner().len() as u64
    } else if let Some(b) = value.downcast_ref::<CelBytes<'_>>() {
        b.inner().len() as u64
    } else if let Some(sizer) = value.as_sizer() {
        (*sizer.size().inner()).max(0) as u64
    } else {
        0
    };
    1 + size / 10
}

fn charge<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let base = if args.len() == 2 {
        args.pop()
            .and_then(|b| b.downcast_ref::<CelInt>().map(|i| (*i.inner()).max(0) as u64))
            .unwrap_or(1)
    } else {
        1
    };
    let value = match args.pop() {
        Some(v) if args.is_empty() => v,
        _ => return Err(ExecutionError::invalid_argument_count(1, args.len() + 1)),
    };
    let cost = cost_of(value.as_ref()) - 1 + base;
    let over = METER.with(|m| match m.get() {
        Some(mut s) => {
            s.used = s.used.saturating_add(cost);
            if s.used > s.limit {
                s.exceeded = true;
            }
            m.set(Some(s));
            s.exceeded
        }
        None => false,
    });
    if over {
        return Err(ExecutionError::function_error(COST_FN, CostError::LimitExceeded));
    }
    Ok(value)
}

/// Registers `@cost` on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(COST_FN, "cost_meter_dyn", vec![DYN_TYPE], charge)?;
    env.add_overload(COST_FN, "cost_meter_dyn_int", vec![DYN_TYPE, INT_TYPE], charge)
}

/// cel-go's base cost of building a list (`common.ListCreateBaseCost`).
const LIST_CREATE_COST: i64 = 10;
/// cel-go's base cost of building a map (`common.MapCreateBaseCost`).
const MAP_CREATE_COST: i64 = 30;

/// `@cost(expr, base)`: charges `base` instead of 1, plus the size of the value.
fn wrap_with_base(expr: IdedExpr, base: i64) -> IdedExpr {
    let id = expr.id;
    IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: COST_FN.to_string(),
            target: None,
            args: vec![
                expr,
                IdedExpr {
                    id,
                    expr: Expr::Literal(LiteralValue::Int(CelInt::from(base))),
                },
            ],
        }),
    }
}

fn wrap(expr: IdedExpr) -> IdedExpr {
    let id = expr.id;
    IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: COST_FN.to_string(),
            target: None,
            args: vec![expr],
        }),
    }
}

/// Wraps `expr`'s calls and comprehensions in `@cost`.
pub fn instrument(expr: IdedExpr) -> IdedExpr {
    let IdedExpr { id, expr } = expr;
    match expr {
        Expr::Call(call) => wrap(IdedExpr {
            id,
            expr: Expr::Call(instrument_call(call)),
        }),
        Expr::Comprehension(c) => wrap(IdedExpr {
            id,
            expr: Expr::Comprehension(Box::new(instrument_comprehension(*c))),
        }),
        Expr::Select(mut s) => {
            let operand = std::mem::take(&mut *s.operand);
            *s.operand = instrument(operand);
            IdedExpr {
                id,
                expr: Expr::Select(s),
            }
        }
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(instrument).collect();
            wrap_with_base(
                IdedExpr {
                    id,
                    expr: Expr::List(l),
                },
                LIST_CREATE_COST,
            )
        }
        Expr::Map(mut m) => {
            for entry in m.entries.iter_mut() {
                instrument_entry(&mut entry.expr);
            }
            wrap_with_base(
                IdedExpr {
                    id,
                    expr: Expr::Map(m),
                },
                MAP_CREATE_COST,
            )
        }
        Expr::Struct(mut s) => {
            for entry in s.entries.iter_mut() {
                instrument_entry(&mut entry.expr);
            }
            IdedExpr {
                id,
                expr: Expr::Struct(s),
            }
        }
        other => IdedExpr { id, expr: other },
    }
}

fn instrument_entry(entry: &mut EntryExpr) {
    match entry {
        EntryExpr::MapEntry(e) => {
            e.key = instrument(std::mem::take(&mut e.key));
            e.value = instrument(std::mem::take(&mut e.value));
        }
        EntryExpr::StructField(f) => {
            f.value = instrument(std::mem::take(&mut f.value));
        }
    }
}

fn instrument_call(mut call: CallExpr) -> CallExpr {
    // A qualified function's namespace (`strings` of `strings.quote`) stays a plain identifier.
    if let Some(target) = call.target.take() {
        call.target = Some(Box::new(match target.expr {
            Expr::Ident(_) => *target,
            _ => instrument(*target),
        }));
    }
    call.args = call.args.into_iter().map(instrument).collect();
    call
}

fn instrument_comprehension(mut c: ComprehensionExpr) -> ComprehensionExpr {
    c.iter_range = instrument(std::mem::take(&mut c.iter_range));
    c.accu_init = instrument(std::mem::take(&mut c.accu_init));
    // Charged once per iteration; a constant condition is left alone so that the interpreter's
    // in-place `map`/`filter` fast path still applies (their steps are charged instead).
    if !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        c.loop_cond = wrap(instrument(std::mem::take(&mut c.loop_cond)));
    }
    let accu = c.accu_var.clone();
    c.loop_step = instrument_step(std::mem::take(&mut c.loop_step), &accu);
    c.result = instrument(std::mem::take(&mut c.result));
    c
}

/// A loop step keeps the shape the interpreter recognises (`@result && x`, `@result + [x]`,
/// `cond ? @result + [x] : @result`): only what it folds in is wrapped.
fn instrument_step(expr: IdedExpr, accu: &str) -> IdedExpr {
    let IdedExpr { id, expr } = expr;
    match expr {
        Expr::Call(mut call) if call.target.is_none() && call.func_name == operators::CONDITIONAL => {
            let mut args = call.args.into_iter();
            let mut out = Vec::new();
            if let Some(guard) = args.next() {
                out.push(wrap(instrument(guard)));
            }
            out.extend(args.map(|a| instrument_step(a, accu)));
            call.args = out;
            IdedExpr {
                id,
                expr: Expr::Call(call),
            }
        }
        Expr::Call(mut call)
            if call.target.is_none()
                && matches!(call.args.first().map(|a| &a.expr), Some(Expr::Ident(n)) if n == accu) =>
        {
            // `@result + [x]` must stay a list literal for the interpreter's fast path.
            call.args = call
                .args
                .into_iter()
                .map(|a| match a.expr {
                    Expr::List(mut l) => {
                        l.elements = l.elements.into_iter().map(instrument).collect();
                        IdedExpr {
                            id: a.id,
                            expr: Expr::List(l),
                        }
                    }
                    other => instrument(IdedExpr {
                        id: a.id,
                        expr: other,
                    }),
                })
                .collect();
            IdedExpr {
                id,
                expr: Expr::Call(call),
            }
        }
        other => instrument(IdedExpr { id, expr: other }),
    }
}
