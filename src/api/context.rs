//! `MLContext` and `MLTensor` handles. A handle holds the objects of one backend (WebGPU or
//! CPU, [`OnBackend`]); the code below each is generic over [`Backend`].

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use js_sys::{Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::api::builder::{BuilderHandle, GraphHandle};
use crate::api::{dictionary, each, to_js, JsResult, OnBackend};
use crate::backend::cpu::CpuContext;
use crate::backend::webgpu::Context;
use crate::backend::{Backend, BackendTensor, TensorDescriptor};
use crate::error::{Error, Result};
use crate::graph::{DataType, GraphBuilder, OperandDescriptor};
use crate::memory::HostBytes;
use crate::operand::MAX_RANK;
use crate::ops::limits::{self, TensorLimits};

/// A context's live tensors by id, so that `dispatch()` can name its tensors by id
/// (wasm-bindgen cannot borrow a list of Rust objects from JavaScript).
pub(crate) type Tensors<B> = Rc<RefCell<HashMap<u64, <B as Backend>::Tensor>>>;

/// A context with its live tensors.
pub(crate) struct Bound<B: Backend> {
    pub(crate) context: B,
    pub(crate) tensors: Tensors<B>,
}

impl<B: Backend> Clone for Bound<B> {
    fn clone(&self) -> Self {
        Bound { context: self.context.clone(), tensors: self.tensors.clone() }
    }
}

impl<B: Backend> Bound<B> {
    fn named(&self, names: Vec<String>, ids: Vec<f64>) -> Result<Vec<(String, B::Tensor)>> {
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

/// A tensor handle's contents, of either backend.
pub(crate) type AnyEntry = OnBackend<Entry<Context>, Entry<CpuContext>>;

impl<B: Backend> Bound<B>
where
    AnyEntry: From<Entry<B>>,
{
    fn create_tensor(&self, descriptor: TensorDescriptor) -> Promise {
        let (created, tensors) = (self.context.create_tensor(descriptor), self.tensors.clone());
        future_to_promise(async move { Ok(register::<B>(&tensors, created.await.map_err(to_js)?).into()) })
    }

    fn create_constant_tensor(&self, operand: OperandDescriptor, bytes: Uint8Array) -> Promise {
        let host = HostBytes::from_js(bytes, self.context.host_byte_counter());
        let (created, tensors) = (self.context.create_constant_tensor(operand, host), self.tensors.clone());
        future_to_promise(async move { Ok(register::<B>(&tensors, created.await.map_err(to_js)?).into()) })
    }

    fn read_tensor(&self, tensor: &B::Tensor) -> JsResult<Promise> {
        self.context.check_read(tensor).map_err(to_js)?;
        // Issued here, not when the promise's future first runs: the copy must come before
        // the dispatches and writes the caller makes next.
        let read = self.context.read_tensor(tensor);
        Ok(future_to_promise(async move {
            let bytes = read.await.map_err(to_js)?;
            Ok(Uint8Array::from(bytes.as_slice()).into())
        }))
    }
}

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
    inner: OnBackend<Bound<Context>, Bound<CpuContext>>,
}

pub(crate) fn register<B: Backend>(tensors: &Tensors<B>, tensor: B::Tensor) -> TensorHandle
where
    AnyEntry: From<Entry<B>>,
{
    tensors.borrow_mut().insert(tensor.id(), tensor.clone());
    TensorHandle { inner: Entry { tensor, tensors: tensors.clone() }.into() }
}

impl ContextHandle {
    pub(crate) fn new_webgpu(context: Context) -> ContextHandle {
        ContextHandle { inner: OnBackend::WebGpu(Bound { context, tensors: Rc::default() }) }
    }

    pub(crate) fn new_cpu(context: CpuContext) -> ContextHandle {
        ContextHandle { inner: OnBackend::Cpu(Bound { context, tensors: Rc::default() }) }
    }

    pub(crate) fn context(&self) -> OnBackend<Context, CpuContext> {
        match &self.inner {
            OnBackend::WebGpu(b) => OnBackend::WebGpu(b.context.clone()),
            OnBackend::Cpu(b) => OnBackend::Cpu(b.context.clone()),
        }
    }
}

#[wasm_bindgen]
impl ContextHandle {
    pub fn accelerated(&self) -> bool {
        each!(&self.inner, b => b.context.accelerated())
    }

    #[wasm_bindgen(js_name = isLost)]
    pub fn is_lost(&self) -> bool {
        each!(&self.inner, b => b.context.is_lost())
    }

    /// Resolves with the loss message once the context is lost.
    pub fn lost(&self) -> Promise {
        each!(&self.inner, b => {
            let lost = b.context.lost();
            future_to_promise(async move { Ok(JsValue::from_str(&lost.await)) })
        })
    }

    pub fn destroy(&self) {
        each!(&self.inner, b => b.context.destroy())
    }

    /// The spec's "check dimensions" of a descriptor (the byte length against
    /// `maxTensorByteLength` included), before its buffer is validated and copied.
    #[wasm_bindgen(js_name = checkDimensions)]
    pub fn check_dimensions(&self, data_type: &str, shape: Vec<u32>) -> JsResult<()> {
        let d = descriptor(data_type, shape).map_err(to_js)?;
        each!(&self.inner, b => d.check_dimensions().and_then(|_| b.context.check_tensor_byte_length(&d)).map_err(to_js))
    }

    /// Internal test hook, not WebNN: the `GPUDevice` behind a WebGPU context, so that the
    /// tests can lose it with `device.destroy()` as a driver reset would.
    #[wasm_bindgen(js_name = gpuDevice)]
    pub fn gpu_device(&self) -> JsValue {
        match &self.inner {
            OnBackend::WebGpu(b) => b.context.device().as_webgpu().map(|d| JsValue::from(d.clone())).unwrap_or(JsValue::UNDEFINED),
            OnBackend::Cpu(_) => JsValue::UNDEFINED,
        }
    }

    /// Internal test hook, not WebNN: the next `n` GPU allocations report out of memory.
    #[wasm_bindgen(js_name = failNextAllocations)]
    pub fn fail_next_allocations(&self, n: u32) {
        if let OnBackend::WebGpu(b) = &self.inner {
            b.context.fail_next_allocations(n);
        }
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
        Ok(match &self.inner {
            OnBackend::WebGpu(b) => BuilderHandle::new(GraphBuilder::new(&b.context).map_err(to_js)?, OnBackend::WebGpu(b.context.clone())),
            OnBackend::Cpu(b) => BuilderHandle::new(GraphBuilder::new(&b.context).map_err(to_js)?, OnBackend::Cpu(b.context.clone())),
        })
    }

    #[wasm_bindgen(js_name = createTensor)]
    pub fn create_tensor(&self, data_type: &str, shape: Vec<u32>, readable: bool, writable: bool) -> JsResult<Promise> {
        let operand = descriptor(data_type, shape).map_err(to_js)?;
        Ok(each!(&self.inner, b => b.create_tensor(TensorDescriptor { operand, readable, writable })))
    }

    /// `bytes` is a JS-owned copy that the constant keeps as its host copy.
    #[wasm_bindgen(js_name = createConstantTensor)]
    pub fn create_constant_tensor(&self, data_type: &str, shape: Vec<u32>, bytes: Uint8Array) -> JsResult<Promise> {
        let operand = descriptor(data_type, shape).map_err(to_js)?;
        Ok(each!(&self.inner, b => b.create_constant_tensor(operand, bytes)))
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
        let backend = match &self.inner {
            OnBackend::WebGpu(b) => OnBackend::WebGpu(b.clone()),
            OnBackend::Cpu(b) => OnBackend::Cpu(b.clone()),
        };
        crate::api::weights::open_weights(backend, blob, file_handle, name, float_type)
    }

    #[wasm_bindgen(js_name = writeTensor)]
    pub fn write_tensor(&self, tensor: &TensorHandle, bytes: &[u8]) -> JsResult<()> {
        match (&self.inner, &tensor.inner) {
            (OnBackend::WebGpu(b), OnBackend::WebGpu(t)) => b.context.write_tensor(&t.tensor, bytes),
            (OnBackend::Cpu(b), OnBackend::Cpu(t)) => b.context.write_tensor(&t.tensor, bytes),
            _ => Err(Error::Type("the MLTensor belongs to another MLContext".into())),
        }
        .map_err(to_js)
    }

    /// Checks synchronously (a later `destroy()` must not turn into a `TypeError`), then
    /// resolves with the bytes.
    #[wasm_bindgen(js_name = readTensor)]
    pub fn read_tensor(&self, tensor: &TensorHandle) -> JsResult<Promise> {
        match (&self.inner, &tensor.inner) {
            (OnBackend::WebGpu(b), OnBackend::WebGpu(t)) => b.read_tensor(&t.tensor),
            (OnBackend::Cpu(b), OnBackend::Cpu(t)) => b.read_tensor(&t.tensor),
            _ => Err(to_js(Error::Type("the MLTensor belongs to another MLContext".into()))),
        }
    }

    pub fn dispatch(
        &self,
        graph: &GraphHandle,
        input_names: Vec<String>,
        input_ids: Vec<f64>,
        output_names: Vec<String>,
        output_ids: Vec<f64>,
    ) -> JsResult<()> {
        fn run<B: Backend>(b: &Bound<B>, graph: &B::Graph, names: [Vec<String>; 2], ids: [Vec<f64>; 2]) -> Result<()> {
            let [input_names, output_names] = names;
            let [input_ids, output_ids] = ids;
            let inputs = b.named(input_names, input_ids)?;
            let outputs = b.named(output_names, output_ids)?;
            b.context.dispatch(graph, &inputs, &outputs)
        }
        let (names, ids) = ([input_names, output_names], [input_ids, output_ids]);
        match (&self.inner, graph.graph()) {
            (OnBackend::WebGpu(b), OnBackend::WebGpu(g)) => run(b, g, names, ids),
            (OnBackend::Cpu(b), OnBackend::Cpu(g)) => run(b, g, names, ids),
            _ => Err(Error::Type("the MLGraph belongs to another MLContext".into())),
        }
        .map_err(to_js)
    }

    /// `MLOpSupportLimits`, from the same table validation reads: every backend runs every
    /// operator and data type of the table.
    #[wasm_bindgen(js_name = opSupportLimits)]
    pub fn op_support_limits(&self) -> JsValue {
        let graph_io = TensorLimitsDictionary::of(&limits::tensor("", limits::ALL_TYPES, 0, MAX_RANK as u32));
        dictionary(&OpSupportLimitsDictionary {
            preferred_input_layout: "nchw",
            max_tensor_byte_length: each!(&self.inner, b => b.context.max_tensor_byte_length()),
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
        dictionary(&each!(&self.inner, b => b.context.memory_info()))
    }
}

/// A tensor with its context's table of live tensors, which it leaves when dropped.
pub(crate) struct Entry<B: Backend> {
    pub(crate) tensor: B::Tensor,
    tensors: Tensors<B>,
}

impl<B: Backend> Drop for Entry<B> {
    fn drop(&mut self) {
        self.tensors.borrow_mut().remove(&self.tensor.id());
    }
}

impl From<Entry<Context>> for AnyEntry {
    fn from(entry: Entry<Context>) -> Self {
        OnBackend::WebGpu(entry)
    }
}

impl From<Entry<CpuContext>> for AnyEntry {
    fn from(entry: Entry<CpuContext>) -> Self {
        OnBackend::Cpu(entry)
    }
}

#[wasm_bindgen]
pub struct TensorHandle {
    pub(crate) inner: AnyEntry,
}

#[wasm_bindgen]
impl TensorHandle {
    /// The id `dispatch()` names the tensor by.
    pub fn id(&self) -> f64 {
        each!(&self.inner, e => e.tensor.id() as f64)
    }

    pub fn destroy(&self) {
        each!(&self.inner, e => e.tensor.destroy())
    }
}
