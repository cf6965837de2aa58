//! The `device` variable: a device's driver, attributes and capacity as CEL values, shaped as
//! `DeviceMatches` builds them (`map domain → map id → value`, unqualified names under the
//! driver's domain, and a missing domain reading as an empty map rather than an error).

use std::any::Any;
use std::collections::HashMap;

use cel::ExecutionError;
use cel::common::traits::{Container, Indexer, Iterable, Iterator as CelIterator, Sizer};
use cel::common::types::{CelBool, CelInt, CelList, CelMap, CelMapKey, CelString, MAP_TYPE, Type};
use cel::common::value::{CowVal, Val};
use k8s_openapi::api::resource::v1::DeviceAttribute;

use super::Device;
use super::quantity::{Quantity, QuantityVal};
use super::semver::{Semver, SemverVal};

/// Why a device could not be turned into CEL values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// An attribute's value could not be converted (`attribute <name>: ...`).
    #[error("attribute {name}: {reason}")]
    Attribute {
        /// The attribute's name as written in the slice.
        name: String,
        /// Why.
        reason: String,
    },
    /// A capacity's quantity did not parse (the API server validates them, so not expected).
    #[error("capacity {name}: {reason}")]
    Capacity {
        /// The capacity's name as written in the slice.
        name: String,
        /// Why.
        reason: String,
    },
}

/// `parseQualifiedName`: (domain, id), the driver being the default domain.
pub fn parse_qualified_name<'a>(name: &'a str, default_domain: &'a str) -> (&'a str, &'a str) {
    match name.find('/') {
        Some(sep) => (&name[..sep], &name[sep + 1..]),
        None => (default_domain, name),
    }
}

fn version(s: &str) -> Result<Box<dyn Val + 'static>, String> {
    Semver::parse(s)
        .map(|v| Box::new(SemverVal(v)) as Box<dyn Val>)
        .map_err(|e| format!("parse semantic version: {e}"))
}

fn list(items: Vec<Box<dyn Val + 'static>>) -> Box<dyn Val + 'static> {
    Box::new(CelList::from(items))
}

/// `getAttributeValue`: the one value an attribute holds, in upstream's order of precedence.
fn attribute_value(attr: &DeviceAttribute) -> Result<Box<dyn Val + 'static>, String> {
    if let Some(v) = &attr.ints {
        return Ok(list(
            v.iter()
                .map(|i| Box::new(CelInt::from(*i)) as Box<dyn Val>)
                .collect(),
        ));
    }
    if let Some(v) = &attr.bools {
        return Ok(list(
            v.iter()
                .map(|b| Box::new(CelBool::from(*b)) as Box<dyn Val>)
                .collect(),
        ));
    }
    if let Some(v) = &attr.strings {
        return Ok(list(
            v.iter()
                .map(|s| Box::new(CelString::from(s.clone())) as Box<dyn Val>)
                .collect(),
        ));
    }
    if let Some(v) = &attr.versions {
        return Ok(list(v.iter().map(|s| version(s)).collect::<Result<_, _>>()?));
    }
    if let Some(i) = attr.int {
        return Ok(Box::new(CelInt::from(i)));
    }
    if let Some(b) = attr.bool {
        return Ok(Box::new(CelBool::from(b)));
    }
    if let Some(s) = &attr.string {
        return Ok(Box::new(CelString::from(s.clone())));
    }
    if let Some(s) = &attr.version {
        return version(s);
    }
    Err("unsupported attribute value".to_string())
}

type Nested = HashMap<String, HashMap<String, Box<dyn Val + 'static>>>;

fn to_map(nested: Nested) -> CelMap<'static> {
    let outer: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = nested
        .into_iter()
        .map(|(domain, ids)| {
            let inner: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> =
                ids.into_iter().map(|(id, v)| (CelMapKey::from(id), v)).collect();
            (
                CelMapKey::from(domain),
                Box::new(CelMap::from(inner)) as Box<dyn Val>,
            )
        })
        .collect();
    CelMap::from(outer)
}

/// The `device` value for `device`.
pub fn device_value(device: &Device<'_>) -> Result<CelMap<'static>, DeviceError> {
    let mut attributes: Nested = HashMap::new();
    for (name, attr) in device.attributes {
        let value = attribute_value(attr).map_err(|reason| DeviceError::Attribute {
            name: name.clone(),
            reason,
        })?;
        let (domain, id) = parse_qualified_name(name, device.driver);
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), value);
    }
    let mut capacity: Nested = HashMap::new();
    for (name, cap) in device.capacity {
        let q = Quantity::parse(&cap.value.0).map_err(|e| DeviceError::Capacity {
            name: name.clone(),
            reason: e.to_string(),
        })?;
        let (domain, id) = parse_qualified_name(name, device.driver);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), Box::new(QuantityVal(q)));
    }
    let mut fields: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = HashMap::new();
    fields.insert(
        CelMapKey::from("driver".to_string()),
        Box::new(CelString::from(device.driver.to_string())),
    );
    fields.insert(
        CelMapKey::from("allowMultipleAllocations".to_string()),
        Box::new(CelBool::from(device.allow_multiple_allocations.unwrap_or(false))),
    );
    fields.insert(
        CelMapKey::from("attributes".to_string()),
        Box::new(DefaultingMap::new(to_map(attributes))),
    );
    fields.insert(
        CelMapKey::from("capacity".to_string()),
        Box::new(DefaultingMap::new(to_map(capacity))),
    );
    Ok(CelMap::from(fields))
}

/// A map whose lookups of a missing key yield an empty map (`newStringInterfaceMapWithDefault`);
/// `in`, `size`, iteration and equality see only the real entries.
#[derive(Debug, Clone)]
pub struct DefaultingMap {
    inner: CelMap<'static>,
    empty: CelMap<'static>,
}

impl DefaultingMap {
    /// Wraps `inner`.
    pub fn new(inner: CelMap<'static>) -> Self {
        DefaultingMap {
            inner,
            empty: CelMap::from(HashMap::new()),
        }
    }
}

impl Val for DefaultingMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(&self.inner)
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(&self.inner)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DefaultingMap>() {
            Some(o) => self.inner.equals(&o.inner),
            None => self.inner.equals(other),
        }
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl cel::common::value::StaticVal for DefaultingMap {}

impl Indexer for DefaultingMap {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        match self.inner.get(idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&self.empty)),
            other => other,
        }
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Iterable for DefaultingMap {
    fn iter<'b, 'w>(&'b self) -> Box<dyn CelIterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        self.inner.iter()
    }
}
