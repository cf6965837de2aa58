//! Resource lists as Karpenter adds, compares and prints them (`utils/resources`): amounts in
//! kube-scheduler's units (milli-cpu, bytes, counts) by resource name, and printed as Go prints a
//! `corev1.ResourceList` in JSON — keys sorted, each quantity in its canonical form (`1k` for a
//! thousand cpus, `1536Mi`), in the format (decimal or binary suffixes) it was written in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::resource::{CPU, amount_of};

/// Amounts by resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAmounts {
    amounts: BTreeMap<String, i64>,
    /// Names first written with a binary suffix (`Ki`, `Mi`, …): Go keeps a quantity's format
    /// through additions, and prints it back in that format.
    binary: BTreeSet<String>,
}

impl ResourceAmounts {
    /// A `corev1.ResourceList`.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Self {
        let mut amounts = Self::default();
        amounts.add_list(list);
        amounts
    }

    /// Amounts already computed, with the names written in binary suffixes.
    pub fn from_amounts(amounts: BTreeMap<String, i64>, binary: BTreeSet<String>) -> Self {
        ResourceAmounts { amounts, binary }
    }

    /// Adds a `corev1.ResourceList` (`resources.MergeInto`).
    pub fn add_list(&mut self, list: &BTreeMap<String, Quantity>) {
        for (name, quantity) in list {
            if !self.amounts.contains_key(name) && is_binary(&quantity.0) {
                self.binary.insert(name.clone());
            }
            *self.amounts.entry(name.clone()).or_default() += amount_of(name, quantity);
        }
    }

    /// The amount of `name` (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        self.amounts.get(name).copied().unwrap_or(0)
    }

    /// Sets the amount of `name` (a decimal quantity if it was not there).
    pub fn set(&mut self, name: &str, amount: i64) {
        self.amounts.insert(name.to_owned(), amount);
    }

    /// Adds `amount` of `name`.
    pub fn add(&mut self, name: &str, amount: i64) {
        *self.amounts.entry(name.to_owned()).or_default() += amount;
    }

    /// The names and amounts.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.amounts.iter().map(|(name, amount)| (name.as_str(), *amount))
    }

    /// `self - other` for the names of `self` (`resources.Subtract`).
    pub fn minus(&self, other: &ResourceAmounts) -> ResourceAmounts {
        let mut result = self.clone();
        for (name, amount) in result.amounts.iter_mut() {
            *amount -= other.get(name);
        }
        result
    }

    /// `self + other` (`resources.Merge`): `self`'s format wins where both name a resource.
    pub fn plus(&self, other: &ResourceAmounts) -> ResourceAmounts {
        let mut result = self.clone();
        for (name, amount) in &other.amounts {
            if !result.amounts.contains_key(name) && other.binary.contains(name) {
                result.binary.insert(name.clone());
            }
            *result.amounts.entry(name.clone()).or_default() += amount;
        }
        result
    }

    /// `resources.Fits(self, available)`: every amount asked for is available (a resource the
    /// node does not have fits only when nothing of it is asked).
    pub fn fits_in(&self, available: &ResourceAmounts) -> bool {
        self.amounts
            .iter()
            .all(|(name, amount)| *amount <= available.get(name))
    }

    /// Whether some resource `limit` names is above its amount there (`filterByRemainingResources`).
    pub fn exceeds(&self, limit: &ResourceAmounts) -> bool {
        limit
            .amounts
            .iter()
            .any(|(name, remaining)| self.get(name) > *remaining)
    }

    /// The largest amount of each resource across `lists` (`resources.MaxResources`).
    pub fn max_of<'a>(lists: impl IntoIterator<Item = &'a ResourceAmounts>) -> ResourceAmounts {
        let mut result = ResourceAmounts::default();
        for list in lists {
            for (name, amount) in &list.amounts {
                let entry = result.amounts.entry(name.clone()).or_insert(*amount);
                *entry = (*entry).max(*amount);
            }
            result.binary.extend(list.binary.iter().cloned());
        }
        result
    }
}

impl fmt::Display for ResourceAmounts {
    /// `resources.String`: `{"cpu":"1k","pods":"1"}`, or `{}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (name, amount)) in self.amounts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let quantity = canonical_quantity(name, *amount, self.binary.contains(name));
            write!(f, "\"{name}\":\"{quantity}\"")?;
        }
        f.write_str("}")
    }
}

/// Whether a quantity is written with a binary suffix.
pub fn is_binary(quantity: &str) -> bool {
    ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|suffix| quantity.trim().ends_with(suffix))
}

/// `Quantity.String()` of an amount: cpu is in milli-units, everything else in units. Binary
/// quantities use the largest power of 1024 that divides them, unless below 1024 in magnitude;
/// decimal ones the largest power of 1000 (down to milli).
pub fn canonical_quantity(name: &str, amount: i64, binary: bool) -> String {
    let milli = if name == CPU {
        amount
    } else {
        amount.saturating_mul(1000)
    };
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    if binary && units.unsigned_abs() >= 1024 {
        let mut value = units;
        for suffix in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
            if value % 1024 != 0 || suffix == "Ei" {
                return format!("{value}{suffix}");
            }
            value /= 1024;
        }
    }
    let mut value = units;
    for suffix in ["", "k", "M", "G", "T", "P", "E"] {
        if value == 0 || value % 1000 != 0 || suffix == "E" {
            return format!("{value}{suffix}");
        }
        value /= 1000;
    }
    unreachable!("the loop returns at its last suffix")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_in_gos_canonical_form() {
        let cases = [
            (CPU, 1_000_000, false, "1k"),
            (CPU, 2000, false, "2"),
            (CPU, 1500, false, "1500m"),
            (CPU, 500, false, "500m"),
            ("pods", 1, false, "1"),
            ("pods", 0, false, "0"),
            ("memory", 16 << 30, true, "16Gi"),
            ("memory", 1536 << 20, true, "1536Mi"),
            ("memory", 512, true, "512"),
            ("memory", 2_000_000_000, false, "2G"),
            ("memory", 1_500_000, false, "1500k"),
        ];
        for (name, amount, binary, want) in cases {
            assert_eq!(canonical_quantity(name, amount, binary), want, "{name} {amount}");
        }
    }

    #[test]
    fn lists_print_as_go_marshals_them() {
        let list = BTreeMap::from([
            ("memory".to_owned(), Quantity("32Gi".into())),
            ("cpu".to_owned(), Quantity("1000".into())),
        ]);
        let mut amounts = ResourceAmounts::from_list(&list);
        amounts.add("pods", 1);
        assert_eq!(amounts.to_string(), r#"{"cpu":"1k","memory":"32Gi","pods":"1"}"#);
        assert_eq!(ResourceAmounts::default().to_string(), "{}");
    }
}
