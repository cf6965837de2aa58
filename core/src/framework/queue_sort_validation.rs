//! `validateCommonQueueSort` of kube-scheduler's configuration validation: every profile must use
//! the first profile's queue sort (the scheduling queue is shared), and the first may enable only
//! one. The refusal prints the offending profile's `queueSort` plugin set as the user wrote it,
//! before any defaults, in the release's format: JSON from v1.34, Go syntax (`%#v`) on v1.33.

use crate::features::ReleaseChanges;
use crate::framework::profile::{KubeSchedulerProfile, PluginRef, PluginSet};

/// The refusals of the profiles' queue sorts, in upstream's order (the first profile's count, then
/// each later profile that differs from the first); empty when they agree.
pub(crate) fn validate_common_queue_sort(
    profiles: &[KubeSchedulerProfile],
    changes: &ReleaseChanges,
) -> Vec<String> {
    let queue_sort = |p: &KubeSchedulerProfile| {
        p.plugins
            .as_ref()
            .map(|plugins| plugins.queue_sort.clone())
            .unwrap_or_default()
    };
    let Some(first) = profiles.first() else {
        return Vec::new();
    };
    let canon = queue_sort(first);
    let mut errs = Vec::new();
    if canon.enabled.len() > 1 {
        errs.push(format!(
            "profiles[0].plugins.queueSort.Enabled: Invalid value: {}: only one queue sort plugin can be enabled",
            canon.enabled.len()
        ));
    }
    let words = if changes.queue_sort_refusal_in_v1_33_form {
        "queueSort must be the same for all profiles"
    } else {
        "must be the same for all profiles"
    };
    for (i, profile) in profiles.iter().enumerate().skip(1) {
        let current = queue_sort(profile);
        if !same_plugin_set(&canon, &current) {
            let value = if changes.queue_sort_refusal_in_v1_33_form {
                go_syntax(&current)
            } else {
                json(&current)
            };
            errs.push(format!(
                "profiles[{i}].plugins.queueSort: Invalid value: {value}: {words}"
            ));
        }
    }
    errs
}

/// `apiequality.Semantic.DeepEqual` on two plugin sets: a weight left out is the internal type's 0.
fn same_plugin_set(a: &PluginSet, b: &PluginSet) -> bool {
    let same = |x: &[PluginRef], y: &[PluginRef]| {
        x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(p, q)| p.name == q.name && p.weight.unwrap_or(0) == q.weight.unwrap_or(0))
    };
    same(&a.enabled, &b.enabled) && same(&a.disabled, &b.disabled)
}

/// The internal `config.PluginSet` as `json.Marshal` writes it (no JSON tags: Go's field names; an
/// empty list was never set, so `null`).
fn json(set: &PluginSet) -> String {
    let list = |plugins: &[PluginRef]| {
        if plugins.is_empty() {
            return "null".to_string();
        }
        let items: Vec<String> = plugins
            .iter()
            .map(|p| {
                format!(
                    "{{\"Name\":{},\"Weight\":{}}}",
                    serde_json::Value::String(p.name.clone()),
                    p.weight.unwrap_or(0)
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    format!(
        "{{\"Enabled\":{},\"Disabled\":{}}}",
        list(&set.enabled),
        list(&set.disabled)
    )
}

/// The internal `config.PluginSet` as Go's `%#v` writes it.
fn go_syntax(set: &PluginSet) -> String {
    let list = |plugins: &[PluginRef]| {
        if plugins.is_empty() {
            return "[]config.Plugin(nil)".to_string();
        }
        let items: Vec<String> = plugins
            .iter()
            .map(|p| {
                format!(
                    "config.Plugin{{Name:{:?}, Weight:{}}}",
                    p.name,
                    p.weight.unwrap_or(0)
                )
            })
            .collect();
        format!("[]config.Plugin{{{}}}", items.join(", "))
    };
    format!(
        "config.PluginSet{{Enabled:{}, Disabled:{}}}",
        list(&set.enabled),
        list(&set.disabled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::KubeVersion;

    fn profiles(yaml: &str) -> Vec<KubeSchedulerProfile> {
        yaml_serde::from_str(yaml).expect("profiles")
    }

    /// The words of the real kube-scheduler binaries (`kube-scheduler --config` with these
    /// profiles, v1.37.2 and v1.33.13).
    #[test]
    fn profiles_must_share_the_first_profiles_queue_sort() {
        let custom_second = "[{schedulerName: a}, {schedulerName: b, plugins: {queueSort: {enabled: [{name: Foo}], disabled: [{name: '*'}]}}}]";
        let custom_first = "[{schedulerName: a, plugins: {queueSort: {enabled: [{name: Foo}], disabled: [{name: '*'}]}}}, {schedulerName: b}]";
        let two_enabled = "[{schedulerName: a, plugins: {queueSort: {enabled: [{name: Foo}, {name: Bar}]}}}]";
        let alike = "[{schedulerName: a, plugins: {queueSort: {enabled: [{name: Foo}]}}}, {schedulerName: b, plugins: {queueSort: {enabled: [{name: Foo, weight: 0}]}}}]";
        let cases: [(&str, (u32, u32), &[&str]); 6] = [
            (
                custom_second,
                (37, 2),
                &[
                    r#"profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"Foo","Weight":0}],"Disabled":[{"Name":"*","Weight":0}]}: must be the same for all profiles"#,
                ],
            ),
            (
                custom_second,
                (33, 13),
                &[
                    r#"profiles[1].plugins.queueSort: Invalid value: config.PluginSet{Enabled:[]config.Plugin{config.Plugin{Name:"Foo", Weight:0}}, Disabled:[]config.Plugin{config.Plugin{Name:"*", Weight:0}}}: queueSort must be the same for all profiles"#,
                ],
            ),
            (
                custom_first,
                (37, 2),
                &[
                    r#"profiles[1].plugins.queueSort: Invalid value: {"Enabled":null,"Disabled":null}: must be the same for all profiles"#,
                ],
            ),
            (
                two_enabled,
                (37, 2),
                &[
                    "profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled",
                ],
            ),
            (alike, (37, 2), &[]),
            ("[{schedulerName: a}, {schedulerName: b}]", (33, 13), &[]),
        ];
        for (yaml, (minor, patch), want) in cases {
            let changes = ReleaseChanges::of(KubeVersion::new(minor, patch));
            assert_eq!(
                validate_common_queue_sort(&profiles(yaml), &changes),
                want,
                "v1.{minor}.{patch} {yaml}"
            );
        }
    }
}
