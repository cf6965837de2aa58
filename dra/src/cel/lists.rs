//! The Kubernetes lists CEL library at `ListsVersion(1)`
//! (`k8s.io/apiserver/pkg/cel/library/lists.go`): `isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf` on lists, and `includes` (on a list: membership; on anything else: equality).

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Why a lists-library call failed (reported as the function's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListsError {
    /// `min`/`max` of an empty list (upstream's text).
    #[error("{0} called on empty list")]
    EmptyList(&'static str),
    /// Called with the wrong number of arguments.
    #[error("expected {want} arguments, got {got}")]
    Arity {
        /// Arguments expected, the receiver included.
        want: usize,
        /// Arguments given.
        got: usize,
    },
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn overload(function: &str, args: &[&dyn Val]) -> ExecutionError {
    ExecutionError::no_such_member_overload(
        function,
        args.iter().map(|a| a.get_type().name().to_owned()).collect(),
    )
}

/// The elements of `list`, borrowed.
fn elements<'b, 'v>(
    function: &str,
    list: &'b (dyn Val + 'v),
) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable = list.as_iterable().ok_or_else(|| overload(function, &[list]))?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| overload(function, &[a]))?
        .compare(b)
        .map_err(|_| overload(function, &[a, b]))
}

fn one<'b, 'v>(function: &str, args: Args<'b, 'v>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = args.len();
    let mut it = args.into_iter();
    match (it.next(), it.next()) {
        (Some(a), None) => Ok(a),
        _ => Err(ExecutionError::function_error(
            function,
            ListsError::Arity { want: 1, got: n },
        )),
    }
}

fn two<'b, 'v>(function: &str, args: Args<'b, 'v>) -> Result<[CowVal<'b, 'v>; 2], ExecutionError> {
    let n = args.len();
    <[CowVal<'b, 'v>; 2]>::try_from(args)
        .map_err(|_| ExecutionError::function_error(function, ListsError::Arity { want: 2, got: n }))
}

fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let list = one("isSorted", args)?;
    let items = elements("isSorted", list.as_ref())?;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let list = one("sum", args)?;
    let items = elements("sum", list.as_ref())?;
    let mut acc: Option<Box<dyn Val + 'v>> = None;
    for item in items {
        acc = Some(match acc {
            None => item.clone_as_boxed(),
            Some(a) => {
                let adder = a.as_adder().ok_or_else(|| overload("sum", &[a.as_ref()]))?;
                adder.add(item)?.into_owned()
            }
        });
    }
    Ok(match acc {
        Some(a) => CowVal::Owned(a),
        None => CowVal::owned(CelInt::from(0)),
    })
}

fn extreme<'b, 'v>(function: &'static str, args: Args<'b, 'v>, prefer: Ordering) -> Out<'b, 'v> {
    let list = one(function, args)?;
    let items = elements(function, list.as_ref())?;
    let mut best: Option<&dyn Val> = None;
    for item in items {
        best = Some(match best {
            None => {
                item.as_comparer().ok_or_else(|| overload(function, &[item]))?;
                item
            }
            Some(b) if compare(function, b, item)? == prefer => item,
            Some(b) => b,
        });
    }
    match best {
        Some(b) => Ok(CowVal::Owned(b.clone_as_boxed())),
        None => Err(ExecutionError::function_error(
            function,
            ListsError::EmptyList(function),
        )),
    }
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme("min", args, Ordering::Greater)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme("max", args, Ordering::Less)
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [list, item] = two("indexOf", args)?;
    let items = elements("indexOf", list.as_ref())?;
    let pos = items.iter().position(|e| e.equals(item.as_ref()));
    Ok(CowVal::owned(CelInt::from(pos.map_or(-1, |p| p as i64))))
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [list, item] = two("lastIndexOf", args)?;
    let items = elements("lastIndexOf", list.as_ref())?;
    let pos = items.iter().rposition(|e| e.equals(item.as_ref()));
    Ok(CowVal::owned(CelInt::from(pos.map_or(-1, |p| p as i64))))
}

fn includes<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [target, item] = two("includes", args)?;
    let found = if target.get_type().name() == LIST_TYPE.name() {
        elements("includes", target.as_ref())?
            .iter()
            .any(|e| e.equals(item.as_ref()))
    } else {
        target.as_ref().equals(item.as_ref())
    };
    Ok(CowVal::owned(CelBool::from(found)))
}

/// Registers the lists library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted_bool", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_member_overload(
        "includes",
        "list_includes_dyn_dyn",
        DYN_TYPE,
        vec![DYN_TYPE],
        includes,
    )?;
    Ok(())
}

/// Two lists' elements, copied.
type ListPair<'v> = (Vec<Box<dyn Val + 'v>>, Vec<Box<dyn Val + 'v>>);

fn two_lists<'b, 'v>(function: &str, args: Args<'b, 'v>) -> Result<ListPair<'v>, ExecutionError> {
    let [a, b] = two(function, args)?;
    let a = elements(function, a.as_ref())?
        .into_iter()
        .map(|v| v.clone_as_boxed())
        .collect();
    let b = elements(function, b.as_ref())?
        .into_iter()
        .map(|v| v.clone_as_boxed())
        .collect();
    Ok((a, b))
}

fn contains_all(haystack: &[Box<dyn Val + '_>], needles: &[Box<dyn Val + '_>]) -> bool {
    needles
        .iter()
        .all(|n| haystack.iter().any(|h| h.equals(n.as_ref())))
}

/// `sets.contains(a, b)`: every element of `b` is in `a` (cel-go's `ext.Sets`).
fn sets_contains<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = two_lists("sets.contains", args)?;
    Ok(CowVal::owned(CelBool::from(contains_all(&a, &b))))
}

/// `sets.equivalent(a, b)`: each contains the other.
fn sets_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = two_lists("sets.equivalent", args)?;
    Ok(CowVal::owned(CelBool::from(
        contains_all(&a, &b) && contains_all(&b, &a),
    )))
}

/// `sets.intersects(a, b)`: some element is in both.
fn sets_intersects<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = two_lists("sets.intersects", args)?;
    let any = a.iter().any(|x| b.iter().any(|y| x.equals(y.as_ref())));
    Ok(CowVal::owned(CelBool::from(any)))
}

/// Registers cel-go's `ext.Sets` functions on `env`.
pub fn sets_extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_intersects,
    )?;
    Ok(())
}
