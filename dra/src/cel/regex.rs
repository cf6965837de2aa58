//! The Kubernetes regex CEL library (`k8s.io/apiserver/pkg/cel/library/regex.go`):
//! `string.find(regex)`, `string.findAll(regex)` and `string.findAll(regex, limit)`. Patterns are
//! RE2 syntax, which the `regex` crate follows (`matches` is the standard library's).

use std::cell::RefCell;

use cel::common::types::{CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// Why a regex-library call failed (reported as the function's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    /// The pattern is not valid RE2 syntax (or too large).
    #[error("error parsing regexp: {0}")]
    Pattern(String),
    /// An argument that should be a string is not.
    #[error("expected a string")]
    NotString,
    /// The limit of `findAll` is not an int.
    #[error("expected an int")]
    NotInt,
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// Upper bound on a compiled pattern, so a pathological one fails rather than eating memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Patterns compiled lately on this thread: selectors use constant patterns, evaluated once per
/// device (cel-go compiles constant patterns once per program).
const REGEX_CACHE_ENTRIES: usize = 32;

thread_local! {
    static REGEX_CACHE: RefCell<Vec<(String, regex::Regex)>> = const { RefCell::new(Vec::new()) };
}

fn compile(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    let cached = REGEX_CACHE.with(|c| {
        c.borrow()
            .iter()
            .find(|(p, _)| p == pattern)
            .map(|(_, r)| r.clone())
    });
    if let Some(re) = cached {
        return Ok(re);
    }
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| ExecutionError::function_error(function, RegexError::Pattern(e.to_string())))?;
    REGEX_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= REGEX_CACHE_ENTRIES {
            c.remove(0);
        }
        c.push((pattern.to_string(), re.clone()));
    });
    Ok(re)
}

fn string_arg<'a>(function: &str, v: &'a dyn Val) -> Result<&'a str, ExecutionError> {
    v.downcast_ref::<CelString<'_>>()
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::function_error(function, RegexError::NotString))
}

fn find<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let [s, re] = <[CowVal<'b, 'v>; 2]>::try_from(args)
        .map_err(|a| ExecutionError::invalid_argument_count(2, a.len()))?;
    let re = compile("find", string_arg("find", re.as_ref())?)?;
    let s = string_arg("find", s.as_ref())?;
    let found = re.find(s).map(|m| m.as_str().to_string()).unwrap_or_default();
    Ok(CowVal::owned(CelString::from(found)))
}

fn find_all_limited<'b, 'v>(s: &str, re: &str, limit: i64) -> Out<'b, 'v> {
    let re = compile("findAll", re)?;
    let limit = if limit < 0 { usize::MAX } else { limit as usize };
    let items: Vec<Box<dyn Val + 'v>> = re
        .find_iter(s)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(items)))
}

fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    match args.as_slice() {
        [s, re] => find_all_limited(
            string_arg("findAll", s.as_ref())?,
            string_arg("findAll", re.as_ref())?,
            -1,
        ),
        [s, re, n] => {
            let n = n
                .downcast_ref::<CelInt>()
                .map(|n| *n.inner())
                .ok_or_else(|| ExecutionError::function_error("findAll", RegexError::NotInt))?;
            find_all_limited(
                string_arg("findAll", s.as_ref())?,
                string_arg("findAll", re.as_ref())?,
                n,
            )
        }
        _ => Err(ExecutionError::invalid_argument_count(2, args.len())),
    }
}

/// Registers the regex library on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("find", "string_find_string", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    Ok(())
}
