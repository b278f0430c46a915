//! The graph cache's handles (`saveGraph`/`loadGraph`, experimental): the core writes a graph's
//! record and hands out its constants' bytes one at a time; `js/webnn.js` keeps them in
//! origin-private storage (constants by content hash, one file per graph) and hands the files
//! back to load.

use std::rc::Rc;

use js_sys::{Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::api::builder::GraphHandle;
use crate::api::context::ContextHandle;
use crate::api::{each, to_js, JsResult, OnBackend};
use crate::backend::cpu::CpuGraph;
use crate::backend::webgpu::Graph;
use crate::backend::BackendGraph;
use crate::error::Error;
use crate::memory::SharedConstant;
use crate::weights::BlobSource;

/// A graph's record and its constants, as `saveGraph` stores them.
#[wasm_bindgen]
pub struct SavedGraphHandle {
    graph: OnBackend<Graph, CpuGraph>,
    record: Vec<u8>,
    constants: Vec<Rc<SharedConstant>>,
}

#[wasm_bindgen]
impl SavedGraphHandle {
    pub fn record(&self) -> Uint8Array {
        Uint8Array::from(self.record.as_slice())
    }

    #[wasm_bindgen(js_name = constantCount)]
    pub fn constant_count(&self) -> u32 {
        self.constants.len() as u32
    }

    /// Resolves with constant `index`'s bytes (read back from the GPU where it has no host copy).
    #[wasm_bindgen(js_name = constantBytes)]
    pub fn constant_bytes(&self, index: u32) -> JsResult<Promise> {
        let constant = self.constants.get(index as usize).cloned().ok_or_else(|| to_js(Error::Type("no such constant".into())))?;
        let bytes = each!(&self.graph, g => {
            let read = BackendGraph::saved_constant_bytes(g, constant);
            Box::pin(read) as std::pin::Pin<Box<dyn std::future::Future<Output = crate::error::Result<Vec<u8>>>>>
        });
        Ok(future_to_promise(async move { Ok(Uint8Array::from(bytes.await.map_err(to_js)?.as_slice()).into()) }))
    }
}

#[wasm_bindgen]
impl GraphHandle {
    /// The graph's record and constants for `saveGraph`.
    pub fn save(&self) -> JsResult<SavedGraphHandle> {
        let (record, constants) = each!(self.graph(), g => BackendGraph::save(g)).map_err(to_js)?;
        let graph = match self.graph() {
            OnBackend::WebGpu(g) => OnBackend::WebGpu(g.clone()),
            OnBackend::Cpu(g) => OnBackend::Cpu(g.clone()),
        };
        Ok(SavedGraphHandle { graph, record, constants })
    }
}

#[wasm_bindgen]
impl ContextHandle {
    /// `loadGraph`: the graph of `record`, with constant `i`'s bytes in `files[i]`, named by its
    /// content hash `keys[i]` (constants of the same name are shared between loaded graphs).
    #[wasm_bindgen(js_name = loadGraph)]
    pub fn load_graph(&self, record: Vec<u8>, keys: Vec<String>, files: Vec<web_sys::Blob>) -> Promise {
        let context = self.context();
        future_to_promise(async move {
            let sources = keys
                .into_iter()
                .zip(files)
                .map(|(key, file)| {
                    let name = format!("saved constant {key}");
                    (key, Rc::new(BlobSource::new(name, file, JsValue::UNDEFINED)))
                })
                .collect();
            let graph = match context {
                OnBackend::WebGpu(context) => OnBackend::WebGpu(Graph::load(&context, &record, sources).await.map_err(to_js)?),
                OnBackend::Cpu(context) => OnBackend::Cpu(CpuGraph::load(&context, &record, sources).map_err(to_js)?),
            };
            Ok(GraphHandle::new(graph).into())
        })
    }
}


/// `MLGraph.inputs` and `outputs` (the explainer's): each name's `MLOperandDescriptor`.
#[derive(serde::Serialize)]
struct GraphDescriptors {
    inputs: std::collections::BTreeMap<String, OperandDescriptorDictionary>,
    outputs: std::collections::BTreeMap<String, OperandDescriptorDictionary>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OperandDescriptorDictionary {
    data_type: &'static str,
    shape: Vec<u32>,
}

#[wasm_bindgen]
impl GraphHandle {
    /// `{inputs, outputs}`: each a record of `MLOperandDescriptor`s by name.
    pub fn descriptors(&self) -> JsValue {
        let (inputs, outputs) = match self.graph() {
            OnBackend::WebGpu(g) => (g.input_descriptors(), g.output_descriptors()),
            OnBackend::Cpu(g) => (g.input_descriptors(), g.output_descriptors()),
        };
        let record = |list: &[(String, crate::operand::OperandDescriptor)]| {
            list.iter()
                .map(|(name, d)| (name.clone(), OperandDescriptorDictionary { data_type: d.data_type.name(), shape: d.shape.clone() }))
                .collect()
        };
        crate::api::dictionary(&GraphDescriptors { inputs: record(inputs), outputs: record(outputs) })
    }
}
