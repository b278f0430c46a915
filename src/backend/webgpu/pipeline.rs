//! The pipeline cache: compute pipelines keyed by kernel source and binding layout, so a kernel is
//! compiled once per context however many graphs use it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::error::{Error, Result};

/// A compiled kernel and the layout its bind groups are made with, with the source and binding
/// counts it was compiled from (what the graph cache saves).
pub struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: Rc<wgpu::BindGroupLayout>,
    pub source: Rc<str>,
    pub reads: usize,
    pub writes: usize,
}

#[derive(Default)]
pub struct PipelineCache {
    layouts: RefCell<HashMap<(usize, usize), Rc<wgpu::BindGroupLayout>>>,
    pipelines: RefCell<HashMap<(Rc<str>, usize, usize), Rc<Pipeline>>>,
}

impl PipelineCache {
    /// Number of distinct pipelines compiled so far.
    pub fn len(&self) -> usize {
        self.pipelines.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn layout(&self, device: &wgpu::Device, reads: usize, writes: usize) -> Rc<wgpu::BindGroupLayout> {
        self.layouts
            .borrow_mut()
            .entry((reads, writes))
            .or_insert_with(|| {
                let entries: Vec<wgpu::BindGroupLayoutEntry> = (0..reads + writes)
                    .map(|i| wgpu::BindGroupLayoutEntry {
                        binding: i as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Storage { read_only: i < reads },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                Rc::new(device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some("webnn"),
                    entries: &entries,
                }))
            })
            .clone()
    }

    /// The pipeline for `source` with `reads` read-only and `writes` read-write storage bindings.
    /// A kernel that fails to compile is an `OperationError` and is not cached: an invalid
    /// pipeline handed out again would dispatch as a no-op, leaving outputs unwritten.
    pub async fn get(&self, device: &wgpu::Device, source: &str, reads: usize, writes: usize) -> Result<Rc<Pipeline>> {
        let key: (Rc<str>, usize, usize) = (source.into(), reads, writes);
        if let Some(p) = self.pipelines.borrow().get(&key) {
            return Ok(p.clone());
        }
        let layout = self.layout(device, reads, writes);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("webnn kernel"),
            source: wgpu::ShaderSource::Wgsl(crate::ops::wgsl::with_prelude(source).into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("webnn"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("webnn kernel"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(Error::Operation(format!("a kernel failed to compile: {e}")));
        }
        let p = Rc::new(Pipeline { pipeline, layout, source: key.0.clone(), reads, writes });
        self.pipelines.borrow_mut().insert(key, p.clone());
        Ok(p)
    }
}

// Native: `wasm-pack test` builds the unit tests for wasm32 too.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use crate::backend::webgpu::{Context, ContextOptions};

    /// A kernel with a WGSL error fails every time it is asked for, not only the first time.
    #[test]
    fn invalid_kernel_is_an_error_every_time() -> crate::error::Result<()> {
        let ctx = pollster::block_on(Context::new(ContextOptions::default()))?;
        let source = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n@compute @workgroup_size(1)\nfn main() { out[0] = undefined_name; }\n";
        for _ in 0..2 {
            let result = pollster::block_on(ctx.inner.pipelines.get(&ctx.inner.device, source, 0, 1));
            match result {
                Err(crate::error::Error::Operation(m)) => assert!(m.contains("compile"), "{m}"),
                Err(e) => panic!("wrong error kind: {e}"),
                Ok(_) => panic!("an invalid kernel compiled"),
            }
        }
        assert_eq!(ctx.pipeline_count(), 0);
        assert!(ctx.take_uncaptured_error().is_none());
        Ok(())
    }
}
