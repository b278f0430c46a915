//! Builder method name -> `Op`: `js/webnn.js`'s operator table converts the arguments and
//! options (with the spec's defaults filled in) into one plain object, which [`Params`] reads for
//! the operator's family (`ops::from_options`); an optional operand option (gemm's `c`) arrives
//! as `true` when given, and the operand itself is appended to the operator's inputs in table
//! order.

use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, Result};
use crate::graph::Number;
use crate::ops::{missing, MethodOptions};

/// The converted arguments of one builder call.
pub struct Params(pub JsValue);

impl Params {
    fn get(&self, key: &str) -> JsValue {
        js_sys::Reflect::get(&self.0, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
    }
}

impl MethodOptions for Params {
    fn f64(&self, key: &str) -> Result<f64> {
        self.get(key).as_f64().ok_or_else(|| missing(key))
    }

    /// An optional `MLNumber` (`undefined` when absent): a bigint stays exact.
    fn opt_number(&self, key: &str) -> Result<Option<Number>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        number(&v).map(Some).ok_or_else(|| missing(key))
    }

    fn u32(&self, key: &str) -> Result<u32> {
        let v = self.f64(key)?;
        if v.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&v) {
            return Err(Error::Type(format!("'{key}' must be an unsigned long, got {v}")));
        }
        Ok(v as u32)
    }

    /// A `long` (the table's converter already enforced its range).
    fn i32(&self, key: &str) -> Result<i32> {
        let v = self.f64(key)?;
        if v.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&v) {
            return Err(Error::Type(format!("'{key}' must be a long, got {v}")));
        }
        Ok(v as i32)
    }

    fn bool(&self, key: &str) -> Result<bool> {
        self.get(key).as_bool().ok_or_else(|| missing(key))
    }

    /// A string; absent means empty (the default of `label`).
    fn string(&self, key: &str) -> Result<String> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(String::new());
        }
        v.as_string().ok_or_else(|| missing(key))
    }

    /// An optional sequence of unsigned longs (`undefined` when absent).
    fn opt_u32s(&self, key: &str) -> Result<Option<Vec<u32>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| missing(key))?;
        let mut out = Vec::with_capacity(array.length() as usize);
        for item in array.iter() {
            let x = item.as_f64().ok_or_else(|| missing(key))?;
            if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
                return Err(Error::Type(format!("'{key}' must hold unsigned longs, got {x}")));
            }
            out.push(x as u32);
        }
        Ok(Some(out))
    }

    /// An optional sequence of numbers (`undefined` when absent).
    fn opt_f64s(&self, key: &str) -> Result<Option<Vec<f64>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| missing(key))?;
        array.iter().map(|item| item.as_f64().ok_or_else(|| missing(key))).collect::<Result<Vec<f64>>>().map(Some)
    }

    /// An optional sequence of strings (`undefined` when absent).
    fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        let v = self.get(key);
        if v.is_undefined() {
            return Ok(None);
        }
        let array: &js_sys::Array = v.dyn_ref().ok_or_else(|| missing(key))?;
        array.iter().map(|item| item.as_string().ok_or_else(|| missing(key))).collect::<Result<Vec<String>>>().map(Some)
    }
}

/// An `MLNumber` from JavaScript: a number, or a bigint kept exact. A bigint beyond the `i128`
/// range (at least 2^127 in magnitude) saturates every integer type and is an infinity in
/// float16, so only its float32 cast depends on its value: it is kept as that float32 value.
pub fn number(v: &JsValue) -> Option<Number> {
    if let Some(x) = v.as_f64() {
        return Some(Number::Double(x));
    }
    let big: &js_sys::BigInt = v.dyn_ref()?;
    let text = String::from(big.to_string(10).ok()?);
    if let Ok(v) = text.parse::<i128>() {
        return Some(Number::BigInt(v));
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text.as_str()),
    };
    // u128 saturates at 2^128 - 1, beyond float32's overflow threshold 2^128 - 2^103; `as`
    // rounds to nearest even, overflowing to infinity.
    let magnitude = digits.parse::<u128>().unwrap_or(u128::MAX) as f32;
    Some(Number::Double(if negative { -magnitude } else { magnitude } as f64))
}
