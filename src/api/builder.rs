//! `MLGraphBuilder` and `MLGraph` handles.

use js_sys::{Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::api::context::{descriptor, TensorHandle};
use crate::api::ops::{number, Params};
use crate::ops::MethodOptions;
use crate::api::{dictionary, each, to_js, JsResult, OnBackend};
use crate::backend::cpu::{CpuContext, CpuGraph};
use crate::backend::webgpu::{Context, Graph};
use crate::backend::{Backend, BackendGraph};
use crate::error::{Error, Result};
use crate::graph::{BuilderContext, DataType, GraphBuilder, Operand};
use crate::memory::{EvictionPriority, HostBytes, Residency};

#[wasm_bindgen]
pub struct BuilderHandle {
    builder: GraphBuilder,
    context: OnBackend<Context, CpuContext>,
    /// Every operand of the builder, by index (JavaScript names operands by index).
    operands: Vec<Operand>,
}

impl BuilderHandle {
    pub(crate) fn new(builder: GraphBuilder, context: OnBackend<Context, CpuContext>) -> BuilderHandle {
        BuilderHandle { builder, context, operands: Vec::new() }
    }

    fn operand(&self, index: u32) -> Result<Operand> {
        self.operands
            .get(index as usize)
            .copied()
            .ok_or_else(|| Error::Type("the MLOperand was created by another MLGraphBuilder".into()))
    }

    fn record(&mut self, operand: Operand) -> u32 {
        self.operands.push(operand);
        (self.operands.len() - 1) as u32
    }

    fn record_result(&mut self, operand: Result<Operand>) -> JsResult<u32> {
        let operand = operand.map_err(to_js)?;
        Ok(self.record(operand))
    }
}

#[wasm_bindgen]
impl BuilderHandle {
    pub fn input(&mut self, name: &str, data_type: &str, shape: Vec<u32>) -> JsResult<u32> {
        let d = descriptor(data_type, shape).map_err(to_js)?;
        let operand = self.builder.input(name, d);
        self.record_result(operand)
    }

    /// `bytes` is a JS-owned copy that the constant keeps as its host copy.
    pub fn constant(&mut self, data_type: &str, shape: Vec<u32>, bytes: Uint8Array) -> JsResult<u32> {
        let d = descriptor(data_type, shape).map_err(to_js)?;
        let host = HostBytes::from_js(bytes, each!(&self.context, c => BuilderContext::host_byte_counter(c)));
        let operand = self.builder.constant_host(d, host);
        self.record_result(operand)
    }

    #[wasm_bindgen(js_name = constantScalar)]
    pub fn constant_scalar(&mut self, data_type: &str, value: JsValue) -> JsResult<u32> {
        let data_type = DataType::from_name(data_type).map_err(to_js)?;
        let value = number(&value).ok_or_else(|| to_js(Error::Type("value must be a number or a bigint".into())))?;
        let operand = self.builder.constant_scalar(data_type, value);
        self.record_result(operand)
    }

    #[wasm_bindgen(js_name = constantTensor)]
    pub fn constant_tensor(&mut self, tensor: &TensorHandle) -> JsResult<u32> {
        let operand = each!(&tensor.inner, entry => self.builder.constant_tensor(&entry.tensor));
        self.record_result(operand)
    }

    /// Records operator `name` (its method name) on operand `inputs` with its converted
    /// arguments and options in `params`; returns `[{index, dataType, shape}]` per output.
    pub fn operator(&mut self, name: &str, inputs: Vec<u32>, params: JsValue) -> JsResult<JsValue> {
        let params = Params(params);
        let op = crate::ops::from_options(name, &params).map_err(to_js)?;
        let inputs: Vec<Operand> = inputs.into_iter().map(|i| self.operand(i)).collect::<Result<_>>().map_err(to_js)?;
        let label = params.string("label").map_err(to_js)?;
        let outputs = self.builder.operator(op, &inputs, &label).map_err(to_js)?;
        let mut result = Vec::new();
        for operand in outputs {
            let d = self.builder.descriptor(operand).map_err(to_js)?.clone();
            result.push(OperatorOutput { index: self.record(operand), data_type: d.data_type.name(), shape: d.shape });
        }
        Ok(dictionary(&result))
    }

    /// Validates synchronously (throws), then resolves with the compiled graph.
    pub fn build(&mut self, names: Vec<String>, indices: Vec<u32>) -> JsResult<Promise> {
        let outputs: Vec<(String, Operand)> = names
            .into_iter()
            .zip(indices)
            .map(|(name, i)| Ok((name, self.operand(i)?)))
            .collect::<Result<_>>()
            .map_err(to_js)?;
        let description = self.builder.prepare_build(&outputs).map_err(to_js)?;
        Ok(match &self.context {
            OnBackend::WebGpu(c) => {
                let compiled = c.compile(description);
                future_to_promise(async move { Ok(GraphHandle { graph: OnBackend::WebGpu(compiled.await.map_err(to_js)?) }.into()) })
            }
            OnBackend::Cpu(c) => {
                let compiled = c.compile(description);
                future_to_promise(async move { Ok(GraphHandle { graph: OnBackend::Cpu(compiled.await.map_err(to_js)?) }.into()) })
            }
        })
    }
}

#[wasm_bindgen]
pub struct GraphHandle {
    graph: OnBackend<Graph, CpuGraph>,
}

impl GraphHandle {
    pub(crate) fn new(graph: OnBackend<Graph, CpuGraph>) -> GraphHandle {
        GraphHandle { graph }
    }

    pub(crate) fn graph(&self) -> &OnBackend<Graph, CpuGraph> {
        &self.graph
    }
}

#[wasm_bindgen]
impl GraphHandle {
    pub fn destroy(&self) {
        each!(&self.graph, g => BackendGraph::destroy(g))
    }

    /// `to` is `"host"` or `"disk"`; resolves once the memory is released.
    #[wasm_bindgen(js_name = swapOut)]
    pub fn swap_out(&self, to: &str) -> Promise {
        let to = if to == "disk" { Residency::Disk } else { Residency::Host };
        each!(&self.graph, g => {
            let swapped = BackendGraph::swap_out(g, to);
            future_to_promise(async move {
                swapped.await.map_err(to_js)?;
                Ok(JsValue::UNDEFINED)
            })
        })
    }

    /// Resolves once the constants are resident (streamed again from their files if needed).
    #[wasm_bindgen(js_name = swapIn)]
    pub fn swap_in(&self) -> Promise {
        each!(&self.graph, g => {
            let swapped = BackendGraph::swap_in(g);
            future_to_promise(async move {
                swapped.await.map_err(to_js)?;
                Ok(JsValue::UNDEFINED)
            })
        })
    }

    pub fn residency(&self) -> String {
        each!(&self.graph, g => BackendGraph::residency(g)).name().to_string()
    }

    #[wasm_bindgen(js_name = deviceBytes)]
    pub fn device_bytes(&self) -> f64 {
        each!(&self.graph, g => BackendGraph::device_bytes(g)) as f64
    }

    #[wasm_bindgen(js_name = hostBytes)]
    pub fn host_bytes(&self) -> f64 {
        each!(&self.graph, g => BackendGraph::host_bytes(g)) as f64
    }

    #[wasm_bindgen(js_name = evictionPriority)]
    pub fn eviction_priority(&self) -> String {
        each!(&self.graph, g => BackendGraph::eviction_priority(g)).name().to_string()
    }

    /// A value that is not an `MLEvictionPriority` is ignored (WebIDL's rule for enum attributes).
    #[wasm_bindgen(js_name = setEvictionPriority)]
    pub fn set_eviction_priority(&self, priority: &str) {
        if let Some(p) = EvictionPriority::from_name(priority) {
            each!(&self.graph, g => BackendGraph::set_eviction_priority(g, p));
        }
    }
}

/// An operator's output as `operator()` returns it to `js/webnn.js`, which makes the `MLOperand`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OperatorOutput {
    index: u32,
    data_type: &'static str,
    shape: Vec<u32>,
}
