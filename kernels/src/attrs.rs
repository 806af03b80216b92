//! Node attributes as the kernels see them.

use std::collections::BTreeMap;

use crate::Tensor;
use crate::error::{KernelError, Result};

/// One attribute value. Graph-valued attributes (`If`/`Loop` bodies) stay in the
/// engine and never reach a kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A float.
    Float(f32),
    /// An integer.
    Int(i64),
    /// A byte string (usually UTF-8).
    String(String),
    /// A tensor.
    Tensor(Tensor),
    /// A list of floats.
    Floats(Vec<f32>),
    /// A list of integers.
    Ints(Vec<i64>),
    /// A list of strings.
    Strings(Vec<String>),
}

impl AttrValue {
    fn kind(&self) -> &'static str {
        match self {
            AttrValue::Float(_) => "float",
            AttrValue::Int(_) => "int",
            AttrValue::String(_) => "string",
            AttrValue::Tensor(_) => "tensor",
            AttrValue::Floats(_) => "floats",
            AttrValue::Ints(_) => "ints",
            AttrValue::Strings(_) => "strings",
        }
    }
}

/// A node's attributes by name, with typed getters that fail with a clear error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes {
    values: BTreeMap<String, AttrValue>,
}

fn wrong_type(name: &str, want: &str, got: &AttrValue) -> KernelError {
    KernelError::BadAttribute {
        name: name.to_string(),
        reason: format!("expected {want}, found {}", got.kind()),
    }
}

fn missing(name: &str) -> KernelError {
    KernelError::BadAttribute {
        name: name.to_string(),
        reason: "required but absent".into(),
    }
}

impl Attributes {
    /// An empty attribute set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an attribute (builder style).
    pub fn with(mut self, name: &str, value: AttrValue) -> Self {
        self.values.insert(name.to_string(), value);
        self
    }

    /// Adds or replaces an attribute.
    pub fn insert(&mut self, name: &str, value: AttrValue) {
        self.values.insert(name.to_string(), value);
    }

    /// Removes an attribute, returning its value if it was present.
    pub fn remove(&mut self, name: &str) -> Option<AttrValue> {
        self.values.remove(name)
    }

    /// The raw value, if present.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.values.get(name)
    }

    /// True when the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Names of all attributes present.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Fails with [`KernelError::UnsupportedAttribute`] if any attribute is not in `known`.
    /// Every kernel builder calls this so that an attribute we ignore is never silently dropped.
    pub fn only(&self, known: &[&str]) -> Result<()> {
        match self.values.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(KernelError::UnsupportedAttribute {
                name: k.clone(),
                reason: "not implemented by this kernel".into(),
            }),
            None => Ok(()),
        }
    }

    /// An integer attribute, or `default` when absent.
    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        self.opt_int(name).map(|v| v.unwrap_or(default))
    }

    /// An integer attribute that is a flag, 0 or 1 (any other value is an error), or
    /// `default` when absent.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.int(name, i64::from(default))? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(KernelError::BadAttribute {
                name: name.into(),
                reason: format!("{v} is neither 0 nor 1"),
            }),
        }
    }

    /// An integer attribute if present.
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Int(v)) => Ok(Some(*v)),
            Some(other) => Err(wrong_type(name, "int", other)),
        }
    }

    /// A required integer attribute.
    pub fn req_int(&self, name: &str) -> Result<i64> {
        self.opt_int(name)?.ok_or_else(|| missing(name))
    }

    /// A float attribute, or `default` when absent.
    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        self.opt_float(name).map(|v| v.unwrap_or(default))
    }

    /// A float attribute if present.
    pub fn opt_float(&self, name: &str) -> Result<Option<f32>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Float(v)) => Ok(Some(*v)),
            Some(other) => Err(wrong_type(name, "float", other)),
        }
    }

    /// A string attribute, or `default` when absent.
    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        match self.values.get(name) {
            None => Ok(default.to_string()),
            Some(AttrValue::String(v)) => Ok(v.clone()),
            Some(other) => Err(wrong_type(name, "string", other)),
        }
    }

    /// An integer-list attribute if present.
    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
            Some(other) => Err(wrong_type(name, "ints", other)),
        }
    }

    /// An integer-list attribute, or an empty list when absent.
    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        self.opt_ints(name).map(Option::unwrap_or_default)
    }

    /// A float-list attribute if present.
    pub fn opt_floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Floats(v)) => Ok(Some(v.clone())),
            Some(other) => Err(wrong_type(name, "floats", other)),
        }
    }

    /// A string-list attribute if present.
    pub fn opt_strings(&self, name: &str) -> Result<Option<Vec<String>>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Strings(v)) => Ok(Some(v.clone())),
            Some(other) => Err(wrong_type(name, "strings", other)),
        }
    }

    /// A tensor attribute if present.
    pub fn opt_tensor(&self, name: &str) -> Result<Option<&Tensor>> {
        match self.values.get(name) {
            None => Ok(None),
            Some(AttrValue::Tensor(v)) => Ok(Some(v)),
            Some(other) => Err(wrong_type(name, "tensor", other)),
        }
    }
}
