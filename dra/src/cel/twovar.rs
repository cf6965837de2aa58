//! cel-go's `ext.TwoVarComprehensions` (in the Kubernetes base environment since 1.32):
//! `x.all(k, v, p)`, `x.exists(k, v, p)`, `x.existsOne(k, v, p)`, `x.transformList(k, v, e)`,
//! `x.transformList(k, v, filter, e)` and `x.transformMap(k, v, e)` /
//! `x.transformMap(k, v, filter, e)`, where `k, v` are a list's index and element or a map's key
//! and value.
//!
//! The interpreter has only one iteration variable, so each macro iterates over the internal
//! `@entries(x)` (the `[k, v]` pairs of `x`) with a hidden variable and binds `k` and `v` to the
//! pair's halves, as `cel.bind` does; `transformMap` builds its map from pairs with `@toMap`.
//! `transformMapEntry` is not supported.

use std::collections::HashMap;

use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators};
use cel::common::types::{CelInt, CelList, CelMap, CelMapKey, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError};

/// The hidden iteration variable (not a name CEL source can spell).
const ENTRY: &str = "@entry";
const RESULT: &str = "@result";
const ENTRIES_FN: &str = "@entries";
const TO_MAP_FN: &str = "@toMap";

/// Why building `transformMap`'s result failed (reported as the function's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TwoVarError {
    /// `@toMap` was not given a list.
    #[error("expected a list")]
    NotAList,
    /// An element of that list is not a `[key, value]` pair.
    #[error("expected a pair")]
    NotAPair,
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn pair<'v>(k: Box<dyn Val + 'v>, v: Box<dyn Val + 'v>) -> Box<dyn Val + 'v> {
    Box::new(CelList::from(vec![k, v]))
}

/// `@entries(x)`: `[[index, element], ...]` of a list, `[[key, value], ...]` of a map.
fn entries<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [x] = <[CowVal<'b, 'v>; 1]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(1, a.len()))?;
    let iterable = x.as_iterable().ok_or_else(|| ExecutionError::UnexpectedType {
        got: x.get_type().name().to_owned(),
        want: "iterable".to_owned(),
    })?;
    let is_list = x.get_type().name() == LIST_TYPE.name();
    let mut items = iterable.iter();
    let mut out = Vec::new();
    let mut index = 0i64;
    while let Some(item) = items.next() {
        if is_list {
            out.push(pair(Box::new(CelInt::from(index)), item.clone_as_boxed()));
            index += 1;
        } else {
            let value = x
                .as_indexer()
                .ok_or_else(|| ExecutionError::UnexpectedType {
                    got: x.get_type().name().to_owned(),
                    want: "map".to_owned(),
                })?
                .get(item)?
                .into_owned();
            out.push(pair(item.clone_as_boxed(), value));
        }
    }
    Ok(CowVal::owned(CelList::from(out)))
}

/// `@toMap(pairs)`: the map of `[key, value]` pairs.
fn to_map<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [pairs] = <[CowVal<'b, 'v>; 1]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(1, a.len()))?;
    let iterable = pairs
        .as_iterable()
        .ok_or_else(|| ExecutionError::function_error("transformMap", TwoVarError::NotAList))?;
    let mut items = iterable.iter();
    let mut map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
    while let Some(item) = items.next() {
        let indexer = item
            .as_indexer()
            .ok_or_else(|| ExecutionError::function_error("transformMap", TwoVarError::NotAPair))?;
        let key = indexer.get(&CelInt::from(0))?.into_owned();
        let value = indexer.get(&CelInt::from(1))?.into_owned();
        let key = CelMapKey::try_from(key)?;
        map.insert(key, value);
    }
    Ok(CowVal::owned(CelMap::from(map)))
}

fn call(helper: &mut MacroExprHelper<'_>, func: &str, args: Vec<IdedExpr>) -> IdedExpr {
    helper.next_expr(Expr::Call(CallExpr {
        func_name: func.to_string(),
        target: None,
        args,
    }))
}

fn ident(helper: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    helper.next_expr(Expr::Ident(name.to_string()))
}

fn literal(helper: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    helper.next_expr(Expr::Literal(value))
}

/// `cel.bind(var, init, body)` as a comprehension.
fn bind(helper: &mut MacroExprHelper<'_>, var: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let range = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(helper, LiteralValue::Boolean(false.into()));
    let step = ident(helper, var);
    helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.to_string(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: body,
    })))
}

/// `body` with `k` and `v` bound to the current entry's halves.
fn bind_entry(helper: &mut MacroExprHelper<'_>, k: &str, v: &str, body: IdedExpr) -> IdedExpr {
    let half = |helper: &mut MacroExprHelper<'_>, i: i64| {
        let e = ident(helper, ENTRY);
        let idx = literal(helper, LiteralValue::Int(CelInt::from(i)));
        call(helper, operators::INDEX, vec![e, idx])
    };
    let value = half(helper, 1);
    let inner = bind(helper, v, value, body);
    let key = half(helper, 0);
    bind(helper, k, key, inner)
}

/// The two variable names, checked to be simple identifiers.
fn var_names(
    helper: &mut MacroExprHelper<'_>,
    args: &[IdedExpr],
    function: &str,
) -> Result<(String, String), ParseError> {
    let name = |e: &IdedExpr| match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        _ => None,
    };
    match (args.first().and_then(name), args.get(1).and_then(name)) {
        (Some(k), Some(v)) if k != v => Ok((k, v)),
        (Some(_), Some(_)) => Err(helper.new_error(
            args[0].id,
            format!("{function}() second variable must be different from the first variable"),
        )),
        _ => {
            let id = args.first().map_or(0, |a| a.id);
            Err(helper.new_error(
                id,
                format!("{function}() variable names must be simple identifiers"),
            ))
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
}

fn expand(
    kind: Kind,
    function: &'static str,
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let (k, v) = var_names(helper, args, function)?;
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let mut rest: Vec<IdedExpr> = args.drain(..).skip(2).collect();
    let body = rest.pop().unwrap_or_default();
    let filter = rest.pop();
    let entries = call(helper, ENTRIES_FN, vec![range]);
    let pred = bind_entry(helper, &k, &v, body);
    let filter = filter.map(|f| bind_entry(helper, &k, &v, f));
    let result_ident = ident(helper, RESULT);
    let (init, cond, step, result) = match kind {
        Kind::All | Kind::Exists => {
            let all = matches!(kind, Kind::All);
            let init = literal(helper, LiteralValue::Boolean(all.into()));
            let accu = ident(helper, RESULT);
            let cond_arg = if all {
                accu
            } else {
                call(helper, operators::LOGICAL_NOT, vec![accu])
            };
            let cond = call(helper, operators::NOT_STRICTLY_FALSE, vec![cond_arg]);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(helper, op, vec![result_ident, pred]);
            (init, cond, step, ident(helper, RESULT))
        }
        Kind::ExistsOne => {
            let init = literal(helper, LiteralValue::Int(CelInt::from(0)));
            let cond = literal(helper, LiteralValue::Boolean(true.into()));
            let one = literal(helper, LiteralValue::Int(CelInt::from(1)));
            let plus = call(helper, operators::ADD, vec![result_ident, one]);
            let same = ident(helper, RESULT);
            let step = call(helper, operators::CONDITIONAL, vec![pred, plus, same]);
            let accu = ident(helper, RESULT);
            let one = literal(helper, LiteralValue::Int(CelInt::from(1)));
            let result = call(helper, operators::EQUALS, vec![accu, one]);
            (init, cond, step, result)
        }
        Kind::TransformList | Kind::TransformMap => {
            let init = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let cond = literal(helper, LiteralValue::Boolean(true.into()));
            let element = if matches!(kind, Kind::TransformMap) {
                let key = ident(helper, ENTRY);
                let zero = literal(helper, LiteralValue::Int(CelInt::from(0)));
                let key = call(helper, operators::INDEX, vec![key, zero]);
                helper.next_expr(Expr::List(ListExpr::new(vec![key, pred])))
            } else {
                pred
            };
            let appended = helper.next_expr(Expr::List(ListExpr::new(vec![element])));
            let add = call(helper, operators::ADD, vec![result_ident, appended]);
            let step = match filter {
                Some(f) => {
                    let same = ident(helper, RESULT);
                    call(helper, operators::CONDITIONAL, vec![f, add, same])
                }
                None => add,
            };
            let accu = ident(helper, RESULT);
            let result = if matches!(kind, Kind::TransformMap) {
                call(helper, TO_MAP_FN, vec![accu])
            } else {
                accu
            };
            (init, cond, step, result)
        }
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(
        ComprehensionExpr {
            iter_range: entries,
            iter_var: ENTRY.to_owned(),
            iter_var2: None,
            accu_var: RESULT.to_owned(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        },
    )))))
}

/// Registers the macros and their runtime helpers on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(ENTRIES_FN, "two_var_entries_dyn", vec![DYN_TYPE], entries)?;
    env.add_overload(TO_MAP_FN, "two_var_to_map_list", vec![LIST_TYPE], to_map)?;
    env.add_macro(Macro::receiver("all", 3, |h, t, a| {
        expand(Kind::All, "all", h, t, a)
    }))?;
    env.add_macro(Macro::receiver("exists", 3, |h, t, a| {
        expand(Kind::Exists, "exists", h, t, a)
    }))?;
    env.add_macro(Macro::receiver("existsOne", 3, |h, t, a| {
        expand(Kind::ExistsOne, "existsOne", h, t, a)
    }))?;
    for arity in [3, 4] {
        env.add_macro(Macro::receiver("transformList", arity, |h, t, a| {
            expand(Kind::TransformList, "transformList", h, t, a)
        }))?;
        env.add_macro(Macro::receiver("transformMap", arity, |h, t, a| {
            expand(Kind::TransformMap, "transformMap", h, t, a)
        }))?;
    }
    Ok(())
}
