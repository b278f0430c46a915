//! `MLContext` and `MLTensor` handles.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use js_sys::{Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::api::builder::{BuilderHandle, GraphHandle};
use crate::api::{dictionary, to_js, JsResult};
use crate::error::{Error, Result};
use crate::operand::MAX_RANK;
use crate::graph::{DataType, GraphBuilder, OperandDescriptor};
use crate::memory::HostBytes;
use crate::ops::limits::{self, TensorLimits};
use crate::backend::webgpu::{Context, Tensor, TensorDescriptor};

/// The context's live tensor handles by tensor id, so that `dispatch()` can name its tensors
/// by id (wasm-bindgen cannot borrow a list of Rust objects from JavaScript).
pub(crate) type Tensors = Rc<RefCell<HashMap<u64, Tensor>>>;

pub(crate) fn descriptor(data_type: &str, shape: Vec<u32>) -> Result<OperandDescriptor> {
    Ok(OperandDescriptor::new(DataType::from_name(data_type)?, shape))
}

/// `MLOpSupportLimits`: the graph's input, constant and output limits and one member per operator.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OpSupportLimitsDictionary {
    preferred_input_layout: &'static str,
    max_tensor_byte_length: u64,
    input: TensorLimitsDictionary,
    constant: TensorLimitsDictionary,
    output: TensorLimitsDictionary,
    #[serde(flatten)]
    operators: BTreeMap<&'static str, BTreeMap<&'static str, TensorLimitsDictionary>>,
}

/// `MLTensorLimits`.
#[derive(serde::Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct TensorLimitsDictionary {
    data_types: Vec<&'static str>,
    rank_range: RankRange,
}

#[derive(serde::Serialize, Clone)]
struct RankRange {
    min: u32,
    max: u32,
}

impl TensorLimitsDictionary {
    fn of(l: &TensorLimits) -> TensorLimitsDictionary {
        TensorLimitsDictionary {
            data_types: l.data_types.iter().map(|t| t.name()).collect(),
            rank_range: RankRange { min: l.rank_min, max: l.rank_max },
        }
    }
}

#[wasm_bindgen]
pub struct ContextHandle {
    context: Context,
    tensors: Tensors,
}

pub(crate) fn register(tensors: &Tensors, tensor: Tensor) -> TensorHandle {
    tensors.borrow_mut().insert(tensor.id(), tensor.clone());
    TensorHandle { tensor, tensors: tensors.clone() }
}

impl ContextHandle {
    pub(crate) fn new(context: Context) -> ContextHandle {
        ContextHandle { context, tensors: Rc::default() }
    }

    fn named(&self, names: Vec<String>, ids: Vec<f64>) -> Result<Vec<(String, Tensor)>> {
        let tensors = self.tensors.borrow();
        names
            .into_iter()
            .zip(ids)
            .map(|(name, id)| match tensors.get(&(id as u64)) {
                Some(t) => Ok((name, t.clone())),
                None => Err(Error::Type(format!("'{name}' is not an MLTensor of this MLContext"))),
            })
            .collect()
    }
}

#[wasm_bindgen]
impl ContextHandle {
    pub fn accelerated(&self) -> bool {
        self.context.accelerated()
    }

    #[wasm_bindgen(js_name = isLost)]
    pub fn is_lost(&self) -> bool {
        self.context.is_lost()
    }

    /// Resolves with the loss message once the context is lost.
    pub fn lost(&self) -> Promise {
        let lost = self.context.lost();
        future_to_promise(async move { Ok(JsValue::from_str(&lost.await)) })
    }

    pub fn destroy(&self) {
        self.context.destroy();
    }

    /// The spec's "check dimensions" of a descriptor (the byte length against
    /// `maxTensorByteLength` included), before its buffer is validated and copied.
    #[wasm_bindgen(js_name = checkDimensions)]
    pub fn check_dimensions(&self, data_type: &str, shape: Vec<u32>) -> JsResult<()> {
        let d = descriptor(data_type, shape).map_err(to_js)?;
        d.check_dimensions().and_then(|_| self.context.check_tensor_byte_length(&d)).map_err(to_js)
    }

    /// Internal test hook, not WebNN: the `GPUDevice` behind the context, so that the tests can
    /// lose it with `device.destroy()` as a driver reset would.
    #[wasm_bindgen(js_name = gpuDevice)]
    pub fn gpu_device(&self) -> JsValue {
        self.context.device().as_webgpu().map(|d| JsValue::from(d.clone())).unwrap_or(JsValue::UNDEFINED)
    }

    /// Internal test hook, not WebNN: the next `n` GPU allocations report out of memory.
    #[wasm_bindgen(js_name = failNextAllocations)]
    pub fn fail_next_allocations(&self, n: u32) {
        self.context.fail_next_allocations(n);
    }

    /// Internal test hook, not WebNN: the byte length of this module's wasm memory, which the
    /// leak tests watch.
    #[wasm_bindgen(js_name = wasmMemoryBytes)]
    pub fn wasm_memory_bytes(&self) -> f64 {
        wasm_bindgen::memory()
            .dyn_into::<js_sys::WebAssembly::Memory>()
            .map(|m| m.buffer().unchecked_into::<js_sys::ArrayBuffer>().byte_length() as f64)
            .unwrap_or(f64::NAN)
    }

    #[wasm_bindgen(js_name = createBuilder)]
    pub fn create_builder(&self) -> JsResult<BuilderHandle> {
        let builder = GraphBuilder::new(&self.context).map_err(to_js)?;
        Ok(BuilderHandle::new(builder, self.context.clone()))
    }

    #[wasm_bindgen(js_name = createTensor)]
    pub fn create_tensor(&self, data_type: &str, shape: Vec<u32>, readable: bool, writable: bool) -> JsResult<Promise> {
        let operand = descriptor(data_type, shape).map_err(to_js)?;
        let context = self.context.clone();
        let tensors = self.tensors.clone();
        Ok(future_to_promise(async move {
            let tensor = context.create_tensor(TensorDescriptor { operand, readable, writable }).await.map_err(to_js)?;
            Ok(register(&tensors, tensor).into())
        }))
    }

    /// `bytes` is a JS-owned copy that the constant keeps as its host copy.
    #[wasm_bindgen(js_name = createConstantTensor)]
    pub fn create_constant_tensor(&self, data_type: &str, shape: Vec<u32>, bytes: Uint8Array) -> JsResult<Promise> {
        let operand = descriptor(data_type, shape).map_err(to_js)?;
        let context = self.context.clone();
        let tensors = self.tensors.clone();
        Ok(future_to_promise(async move {
            let host = HostBytes::from_js(bytes, context.host_byte_counter());
            let tensor = context.create_constant_tensor_host(operand, host).await.map_err(to_js)?;
            Ok(register(&tensors, tensor).into())
        }))
    }

    /// The `openWeights()` extension: `blob` is a `File`, a `Blob` or a `FileSystemFileHandle`'s
    /// file, `file_handle` that handle (`undefined` otherwise), `name` names it in errors.
    #[wasm_bindgen(js_name = openWeights)]
    pub fn open_weights(
        &self,
        blob: web_sys::Blob,
        file_handle: JsValue,
        name: String,
        float_type: Option<String>,
    ) -> JsResult<Promise> {
        let (context, tensors) = (self.context.clone(), self.tensors.clone());
        crate::api::weights::open_weights(context, tensors, blob, file_handle, name, float_type)
    }

    #[wasm_bindgen(js_name = writeTensor)]
    pub fn write_tensor(&self, tensor: &TensorHandle, bytes: &[u8]) -> JsResult<()> {
        self.context.write_tensor(&tensor.tensor, bytes).map_err(to_js)
    }

    /// Checks synchronously (a later `destroy()` must not turn into a `TypeError`), then
    /// resolves with the bytes.
    #[wasm_bindgen(js_name = readTensor)]
    pub fn read_tensor(&self, tensor: &TensorHandle) -> JsResult<Promise> {
        self.context.check_read(&tensor.tensor, None).map_err(to_js)?;
        // Issued here, not when the promise's future first runs: the copy must come before
        // the dispatches and writes the caller makes next.
        let read = self.context.read_tensor(&tensor.tensor);
        Ok(future_to_promise(async move {
            let bytes = read.await.map_err(to_js)?;
            Ok(Uint8Array::from(bytes.as_slice()).into())
        }))
    }

    pub fn dispatch(
        &self,
        graph: &GraphHandle,
        input_names: Vec<String>,
        input_ids: Vec<f64>,
        output_names: Vec<String>,
        output_ids: Vec<f64>,
    ) -> JsResult<()> {
        let inputs = self.named(input_names, input_ids).map_err(to_js)?;
        let outputs = self.named(output_names, output_ids).map_err(to_js)?;
        self.context.dispatch(graph.graph(), &inputs, &outputs).map_err(to_js)
    }

    /// `MLOpSupportLimits`, from the same table validation reads.
    #[wasm_bindgen(js_name = opSupportLimits)]
    pub fn op_support_limits(&self) -> JsValue {
        let graph_io = TensorLimitsDictionary::of(&limits::tensor("", limits::ALL_TYPES, 0, MAX_RANK as u32));
        dictionary(&OpSupportLimitsDictionary {
            preferred_input_layout: "nchw",
            max_tensor_byte_length: self.context.max_tensor_byte_length(),
            input: graph_io.clone(),
            constant: graph_io.clone(),
            output: graph_io,
            operators: limits::all()
                .iter()
                .map(|op| (op.name, op.operands.iter().map(|l| (l.name, TensorLimitsDictionary::of(l))).collect()))
                .collect(),
        })
    }

    /// The `memoryInfo()` extension; `budgetBytes` is `null` without a budget.
    #[wasm_bindgen(js_name = memoryInfo)]
    pub fn memory_info(&self) -> JsValue {
        dictionary(&self.context.memory_info())
    }
}

#[wasm_bindgen]
pub struct TensorHandle {
    tensor: Tensor,
    tensors: Tensors,
}

impl TensorHandle {
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}

#[wasm_bindgen]
impl TensorHandle {
    /// The id `dispatch()` names the tensor by.
    pub fn id(&self) -> f64 {
        self.tensor.id() as f64
    }

    pub fn destroy(&self) {
        self.tensor.destroy();
    }
}

impl Drop for TensorHandle {
    fn drop(&mut self) {
        self.tensors.borrow_mut().remove(&self.tensor.id());
    }
}
