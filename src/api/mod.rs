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
mod cache;
mod context;
mod ops;
mod weights;

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::backend::cpu::CpuContext;
use crate::backend::webgpu::Context;
use crate::backend::{ContextOptions, PowerPreference};
use crate::error::Error;

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

/// A value of the WebGPU backend or of the CPU backend: what a handle holds.
pub(crate) enum OnBackend<W, C> {
    WebGpu(W),
    Cpu(C),
}

/// Evaluates `$body` with `$x` bound to the value inside an [`OnBackend`], whichever backend it
/// is of (the body is generic code over [`crate::backend::Backend`]).
macro_rules! each {
    ($value:expr, $x:ident => $body:expr) => {
        match $value {
            $crate::api::OnBackend::WebGpu($x) => $body,
            $crate::api::OnBackend::Cpu($x) => $body,
        }
    };
}
pub(crate) use each;

/// Which backend contexts get (`install({backend})`): `Auto` is a hardware GPU's WebGPU when
/// there is one and the CPU otherwise; `WebGpu` takes any WebGPU adapter, software ones
/// included; `Cpu` always the CPU. `accelerated: false` is the CPU in every case.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Preference {
    Auto,
    WebGpu,
    Cpu,
}

thread_local! {
    static PREFERENCE: std::cell::Cell<Preference> = const { std::cell::Cell::new(Preference::Auto) };
}

/// Sets which backend later contexts get: `"auto"` (the default), `"webgpu"` or `"cpu"`;
/// `false` for any other name.
#[wasm_bindgen(js_name = preferBackend)]
pub fn prefer_backend(name: &str) -> bool {
    let preference = match name {
        "auto" => Preference::Auto,
        "webgpu" => Preference::WebGpu,
        "cpu" => Preference::Cpu,
        _ => return false,
    };
    PREFERENCE.with(|p| p.set(preference));
    true
}

/// Threads the CPU backend runs kernels on: the page's own and the Web Workers that have
/// entered [`cpu_worker`] (none in the plain build).
#[wasm_bindgen(js_name = cpuThreads)]
pub fn cpu_threads() -> u32 {
    crate::backend::cpu::threads::count() as u32
}

/// The body of a CPU thread of the atomics build (`js/cpu_worker.js`, a Web Worker over the
/// page's shared memory): runs kernel tasks as the page publishes them. Never returns.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = cpuWorker)]
pub fn cpu_worker() {
    crate::backend::cpu::threads::work()
}

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
        let preference = PREFERENCE.with(|p| p.get());
        future_to_promise(async move {
            if accelerated && preference != Preference::Cpu {
                match Context::request_adapter(&options).await {
                    Ok(adapter) if preference == Preference::WebGpu || !Context::is_software(&adapter.get_info()) => {
                        let context = Context::on_adapter(adapter, options).await.map_err(to_js)?;
                        return Ok(ContextHandle::new_webgpu(context).into());
                    }
                    Err(e) if preference == Preference::WebGpu => return Err(to_js(e)),
                    _ => {}
                }
            }
            Ok(ContextHandle::new_cpu(CpuContext::new(options)).into())
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
