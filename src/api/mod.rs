//! The wasm-bindgen layer under the WebNN JavaScript API.
//!
//! `js/webnn.js` defines the spec's interfaces (`ML`, `MLContext`, `MLGraphBuilder`, `MLOperand`,
//! `MLGraph`, `MLTensor`, and the `MLWeightFile` extension) and does the WebIDL conversions
//! (dictionaries, enums, `[EnforceRange]`, buffer sources); this layer maps the converted arguments to the core and the core's
//! [`Error`] to the matching JavaScript exception, in [`to_js`]. The JavaScript objects hold the
//! handles defined here; the handles hold the core's reference-counted objects.
//!
//! The JavaScript module is a snippet of this crate, so it ships inside the wasm-bindgen output
//! and the same module instance serves `pkg/index.js` and the browser tests.

mod builder;
mod context;
mod ops;
mod weights;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::error::Error;
use crate::backend::webgpu::{Context, ContextOptions, PowerPreference};

pub use builder::{BuilderHandle, GraphHandle};
pub use context::{ContextHandle, TensorHandle};
pub use weights::WeightFileHandle;

#[wasm_bindgen(module = "/js/webnn.js")]
extern "C" {
    /// Defines `navigator.ml` and the interfaces; returns whether it did.
    #[wasm_bindgen(js_name = install)]
    fn install_interfaces(options: &JsValue) -> bool;
}

/// A dictionary the API returns, as a plain JavaScript object (through `serde-wasm-bindgen`:
/// `None` is `null`, maps are objects, integers are numbers). The dictionaries hold byte counts
/// and sizes far below 2^53, the only values that could fail to convert.
pub(crate) fn dictionary<T: serde::Serialize>(value: &T) -> JsValue {
    value.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).unwrap_or(JsValue::NULL)
}

/// The core's error as the exception the spec names: `TypeError` or a `DOMException`.
pub(crate) fn to_js(error: Error) -> JsValue {
    match error {
        Error::Type(message) => js_sys::TypeError::new(&message).into(),
        other => match web_sys::DomException::new_with_message_and_name(other.message(), other.name()) {
            Ok(exception) => exception.into(),
            Err(e) => e,
        },
    }
}

pub(crate) type JsResult<T> = std::result::Result<T, JsValue>;

/// The entry point `js/webnn.js` receives from the loader: everything else is reached through
/// the objects it returns.
#[wasm_bindgen]
pub struct Backend;

#[wasm_bindgen]
impl Backend {
    /// `ML.createContext(options)` after conversion: `power_preference` is one of the
    /// `MLPowerPreference` values, `memory_budget` and `host_memory_budget` are byte counts or
    /// `undefined`.
    #[wasm_bindgen(js_name = createContext)]
    pub fn create_context(
        &self,
        power_preference: &str,
        accelerated: bool,
        memory_budget: Option<f64>,
        host_memory_budget: Option<f64>,
    ) -> Promise {
        let power_preference = match power_preference {
            "high-performance" => PowerPreference::HighPerformance,
            "low-power" => PowerPreference::LowPower,
            _ => PowerPreference::Default,
        };
        let options = ContextOptions {
            power_preference,
            accelerated,
            memory_budget: memory_budget.map(|b| b as u64),
            host_memory_budget: host_memory_budget.map(|b| b as u64),
        };
        future_to_promise(async move {
            let context = Context::new(options).await.map_err(to_js)?;
            Ok(ContextHandle::new(context).into())
        })
    }
}

/// The backend `js/index.js` hands to `install()` once the wasm module is loaded.
#[wasm_bindgen]
pub fn backend() -> Backend {
    console_error_panic_hook::set_once();
    Backend
}

/// Installs the WebNN interfaces with this (already loaded) module as the backend; what the
/// browser tests call. `force` replaces a native WebNN implementation.
#[wasm_bindgen(js_name = installWithBackend)]
pub fn install(force: bool) -> bool {
    let options = js_sys::Object::new();
    let set = |key: &str, value: JsValue| js_sys::Reflect::set(&options, &key.into(), &value).is_ok();
    set("force", force.into());
    set("backend", backend().into());
    install_interfaces(&options)
}
