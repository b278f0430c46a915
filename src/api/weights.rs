//! `MLWeightFile` handles: `context.openWeights(blob)` reads a weight file's header from a
//! `Blob` (a `File`, or a `FileSystemFileHandle`'s file) and `constantTensor(name)` streams one
//! tensor to the GPU as a constant `MLTensor` that can go to the `"disk"` tier. On the CPU
//! backend a tensor is read whole into the backend's memory, and from the file again after it
//! left it.

use std::rc::Rc;

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::api::context::{register, Bound};
use crate::api::{dictionary, each, to_js, JsResult, OnBackend};
use crate::backend::cpu::CpuContext;
use crate::backend::webgpu::Context;
use crate::error::{Error, Result};
use crate::graph::{DataType, OperandDescriptor};
use crate::weights::TensorInfo;
use crate::weights::{BlobSource, LoadOptions, WeightFile};

/// `context.openWeights(source, options)` after conversion: `file_handle` is the
/// `FileSystemFileHandle` `blob` came from, if any (read through sync access handles in a
/// dedicated Worker), `name` names the file in errors,
/// `float_type` is `"float32"`, `"float16"` or `undefined`.
pub(crate) fn open_weights(
    backend: OnBackend<Bound<Context>, Bound<CpuContext>>,
    blob: web_sys::Blob,
    file_handle: JsValue,
    name: String,
    float_type: Option<String>,
) -> JsResult<Promise> {
    let float_type = float_type.map(|t| DataType::from_name(&t)).transpose().map_err(to_js)?;
    let options = LoadOptions { float_type, ..LoadOptions::default() };
    Ok(future_to_promise(async move {
        if each!(&backend, b => b.context.is_lost()) {
            return Err(to_js(Error::InvalidState("the MLContext is lost".into())));
        }
        let source = Rc::new(BlobSource::new(name, blob, file_handle));
        let file = WeightFile::open(&*source).await.map_err(to_js)?;
        Ok(WeightFileHandle { file: Rc::new(file), source, backend, options }.into())
    }))
}

#[wasm_bindgen]
pub struct WeightFileHandle {
    file: Rc<WeightFile>,
    source: Rc<BlobSource>,
    backend: OnBackend<Bound<Context>, Bound<CpuContext>>,
    options: LoadOptions,
}

impl WeightFileHandle {
    fn descriptor(&self, info: &TensorInfo) -> Result<OperandDescriptor> {
        match &self.backend {
            OnBackend::WebGpu(b) => self.file.descriptor(&b.context, info, &self.options),
            OnBackend::Cpu(b) => self.file.load_descriptor(info, &self.options, false, b.context.max_tensor_byte_length()),
        }
    }
}

#[wasm_bindgen]
impl WeightFileHandle {
    /// `[{name, dataType, shape, byteLength, storedType, fileByteLength}]`: the constant each
    /// tensor becomes (`dataType` is the file's type name where no WebNN type converts it;
    /// `constantTensor()` then rejects) and its bytes in the file.
    pub fn tensors(&self) -> JsValue {
        let entries: Vec<TensorEntry> = self
            .file
            .tensors
            .iter()
            .map(|info| {
                let (data_type, byte_length) = match self.descriptor(info) {
                    Ok(d) => (d.data_type.name().to_string(), Some(d.byte_length())),
                    Err(_) => (info.type_name.clone(), None),
                };
                TensorEntry {
                    name: &info.name,
                    data_type,
                    shape: &info.shape,
                    byte_length,
                    stored_type: &info.type_name,
                    file_byte_length: info.byte_length,
                }
            })
            .collect();
        dictionary(&entries)
    }

    /// Streams tensor `name` to a constant tensor; `on_progress(loaded, total)` after each chunk.
    /// With `wait` false it resolves once the GPU buffer is allocated and the bytes stream in the
    /// background, ahead of any queue work issued later (so a graph can be built meanwhile).
    #[wasm_bindgen(js_name = constantTensor)]
    pub fn constant_tensor(&self, name: String, on_progress: Option<Function>, wait: bool) -> Promise {
        let (file, source, options) = (self.file.clone(), self.source.clone(), self.options.clone());
        let (context, tensors) = match &self.backend {
            OnBackend::WebGpu(b) => (b.context.clone(), b.tensors.clone()),
            OnBackend::Cpu(b) => {
                let (b, descriptor) = (b.clone(), self.file.tensor(&name).and_then(|info| self.descriptor(info)));
                return future_to_promise(async move {
                    let descriptor = descriptor.map_err(to_js)?;
                    let info = file.tensor(&name).map_err(to_js)?;
                    let tensor = crate::backend::cpu::loader::constant_tensor(&b.context, &file, &source, info, descriptor, &options)
                        .await
                        .map_err(to_js)?;
                    if let Some(f) = &on_progress {
                        let _ = f.call2(&JsValue::UNDEFINED, &(info.byte_length as f64).into(), &(info.byte_length as f64).into());
                    }
                    Ok(register::<CpuContext>(&b.tensors, tensor).into())
                });
            }
        };
        // Taken in the call, not in the future (which starts in a microtask), so that calls made
        // together all count before the first of them queues its stream.
        let queuing = (!wait).then(|| context.queuing_stream());
        future_to_promise(async move {
            let mut progress = move |loaded: u64, total: u64| {
                if let Some(f) = &on_progress {
                    // A throwing callback does not stop the stream.
                    let _ = f.call2(&JsValue::UNDEFINED, &(loaded as f64).into(), &(total as f64).into());
                }
            };
            if !wait {
                let (tensor, constant) =
                    file.pending_constant_tensor(&context, &source, &name, &options).await.map_err(to_js)?;
                // The batch this stream joins wakes in a later task, after it is queued.
                drop(queuing);
                context.stream_in_background(constant, Box::new(progress));
                return Ok(register::<Context>(&tensors, tensor).into());
            }
            let (tensor, _) =
                file.constant_tensor(&context, &source, &name, &options, &mut progress).await.map_err(to_js)?;
            Ok(register::<Context>(&tensors, tensor).into())
        })
    }
}

/// One tensor of a weight file's listing (`MLWeightFile.tensors`): `dataType` and `byteLength` as
/// loaded (`byteLength` null when the stored type cannot be loaded), `storedType` and
/// `fileByteLength` as stored.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TensorEntry<'a> {
    name: &'a str,
    data_type: String,
    shape: &'a [u64],
    byte_length: Option<u64>,
    stored_type: &'a str,
    file_byte_length: u64,
}
