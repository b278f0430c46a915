//! `MLContext`'s core: the wgpu device with the adapter's real limits and features, its buffer
//! registry and pipeline cache, limits and loss. Allocation is in `allocation.rs`, the queue and
//! deferred work in `queue.rs`, reads in `read.rs`, tensors in `tensor.rs`, dispatch in
//! `dispatch.rs`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::memory::{MemoryInfo, MemoryState};
use crate::memory::buffer::BufferRegistry;
use crate::backend::oneshot::Signal;
use crate::backend::{ContextOptions, PowerPreference};
use crate::backend::webgpu::pipeline::PipelineCache;
use crate::backend::webgpu::queue::{Deferred, PendingCopy, PendingPass, BusyCount};

pub(crate) struct ContextInner {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter_info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub shader_f16: bool,
    pub subgroups: bool,
    pub options: ContextOptions,
    pub registry: Rc<BufferRegistry>,
    pub pipelines: PipelineCache,
    pub memory: MemoryState,
    /// Bounds the weight-file writes queued but not yet on the GPU, across all streams.
    pub write_fence: crate::backend::webgpu::loader::WriteFence,
    /// The file streams running at once, and those waiting for a lane.
    pub lanes: Rc<crate::backend::webgpu::lanes::Lanes>,
    /// Copies and compute passes the next submission records before its own work (see
    /// [`PendingCopy`], [`PendingPass`]).
    pub(super) pending_copies: RefCell<Vec<PendingCopy>>,
    pub(super) pending_passes: RefCell<Vec<PendingPass>>,
    /// The weight loader's host buffers (a chunk as read, and converted), reused between streams.
    pub loader_buffers: Cell<(Vec<u8>, Vec<u8>)>,
    pub(super) lost: Signal,
    /// Mapped-read staging buffers free for reuse (see `read.rs`).
    pub(super) free_staging: RefCell<Vec<wgpu::Buffer>>,
    pub(super) deferred: Deferred,
    pub(super) last_uncaptured_error: Arc<Mutex<Option<String>>>,
    pub(super) next_tensor_id: Cell<u64>,
    /// Test-only fault injection: allocations inside an [`AllocationScope`] still to report
    /// out of memory, and how many did so far.
    pub(super) failing_allocations: Cell<u32>,
    pub(super) injected_failures: Cell<u64>,
    pub(super) open_allocation_scopes: Cell<u32>,
    /// Allocations waiting for the GPU's verdict, and what waits for none to be left.
    pub(super) unconfirmed: BusyCount,
    /// `constantTensor(name, {wait: false})` calls whose stream is not queued yet: a batch of
    /// queued streams waits for them to join it, and the lanes split them (see `runtime::lanes`).
    pub(super) queuing_streams: BusyCount,
    /// Constants of graphs loaded from the graph cache, by content key: graphs loaded with the
    /// same bytes share one constant, as graphs built with one constant tensor do.
    pub(super) saved_constants: RefCell<std::collections::HashMap<String, std::rc::Weak<crate::memory::SharedConstant>>>,
}

thread_local! {
    static INSTANCE: std::cell::OnceCell<wgpu::Instance> = const { std::cell::OnceCell::new() };
}

/// One wgpu instance for every context of the thread: on the H200's Vulkan driver a process
/// could create only 30 instances, even when each was dropped, so the 31st context found no adapter.
fn shared_instance() -> wgpu::Instance {
    INSTANCE.with(|i| i.get_or_init(|| wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle())).clone())
}

/// Room kept below the device's buffer limits for what a backend adds to a buffer's memory
/// (alignment, over-read padding): SwiftShader cannot allocate a buffer of exactly the
/// maxBufferSize it advertises, so a tensor of maxTensorByteLength would fail with UnknownError.
const ALLOCATION_HEADROOM: u64 = 64 * 1024;

/// A handle to a context; clones share it.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Rc<ContextInner>,
}
/// See [`Context::downgrade`].
pub(crate) struct WeakContext(std::rc::Weak<ContextInner>);

impl WeakContext {
    pub(crate) fn upgrade(&self) -> Option<Context> {
        self.0.upgrade().map(|inner| Context { inner })
    }
}

impl Context {
    /// `ML.createContext(options)`: requests an adapter and a device with the adapter's limits
    /// and its `shader-f16` and subgroup features when present.
    pub async fn new(options: ContextOptions) -> Result<Context> {
        let adapter = Context::request_adapter(&options).await?;
        Context::on_adapter(adapter, options).await
    }

    /// The adapter a context of `options` would use; `NotSupportedError` when there is none.
    pub async fn request_adapter(options: &ContextOptions) -> Result<wgpu::Adapter> {
        let power_preference = match options.power_preference {
            PowerPreference::Default => wgpu::PowerPreference::None,
            PowerPreference::HighPerformance => wgpu::PowerPreference::HighPerformance,
            PowerPreference::LowPower => wgpu::PowerPreference::LowPower,
        };
        shared_instance()
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::NotSupported(format!("no WebGPU adapter is available: {e}")))
    }

    /// Whether an adapter is a CPU pretending to be a GPU: the browser's fallback adapter
    /// (`isFallbackAdapter`), SwiftShader or llvmpipe.
    pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
        let name = info.name.to_lowercase();
        info.device_type == wgpu::DeviceType::Cpu || name.contains("swiftshader") || name.contains("llvmpipe")
    }

    /// A context on `adapter`.
    pub async fn on_adapter(adapter: wgpu::Adapter, options: ContextOptions) -> Result<Context> {
        let available = adapter.features();
        let mut required_features = wgpu::Features::empty();
        for feature in [wgpu::Features::SHADER_F16, wgpu::Features::SUBGROUP] {
            if available.contains(feature) {
                required_features |= feature;
            }
        }
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webnn-wgpu"),
                required_features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NotSupported(format!("the WebGPU device could not be created: {e}")))?;
        Ok(Context::from_device(adapter.get_info(), device, queue, options))
    }

    fn from_device(
        adapter_info: wgpu::AdapterInfo,
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: ContextOptions,
    ) -> Context {
        let lost = Signal::default();
        let lost_in_callback = lost.clone();
        device.set_device_lost_callback(move |_reason, message| {
            lost_in_callback.set(format!("the GPU device was lost: {message}"));
        });
        // wgpu's default handler panics on errors outside a scope; a panic would kill the page's
        // wasm module, so errors are recorded instead and surfaced where they are checked.
        let last_uncaptured_error = Arc::new(Mutex::new(None));
        let sink = last_uncaptured_error.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut slot) = sink.lock() {
                *slot = Some(e.to_string());
            }
        }));
        let features = device.features();
        let memory = MemoryState::new(options.memory_budget, options.host_memory_budget);
        Context {
            inner: Rc::new(ContextInner {
                limits: device.limits(),
                shader_f16: features.contains(wgpu::Features::SHADER_F16),
                subgroups: features.contains(wgpu::Features::SUBGROUP),
                adapter_info,
                device,
                queue,
                options,
                registry: Rc::new(BufferRegistry::default()),
                pipelines: PipelineCache::default(),
                memory,
                write_fence: Default::default(),
                lanes: Rc::default(),
                pending_copies: RefCell::default(),
                pending_passes: RefCell::default(),
                loader_buffers: Cell::default(),
                lost,
                free_staging: RefCell::default(),
                deferred: Deferred::default(),
                last_uncaptured_error,
                next_tensor_id: Cell::new(1),
                failing_allocations: Cell::new(0),
                injected_failures: Cell::new(0),
                open_allocation_scopes: Cell::new(0),
                unconfirmed: BusyCount::default(),
                queuing_streams: BusyCount::default(),
                saved_constants: RefCell::default(),
            }),
        }
    }

    /// A handle that does not keep the context alive (for what the context itself holds).
    pub(crate) fn downgrade(&self) -> WeakContext {
        WeakContext(Rc::downgrade(&self.inner))
    }

    pub fn same(&self, other: &Context) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.inner.adapter_info
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.inner.limits
    }

    pub fn has_shader_f16(&self) -> bool {
        self.inner.shader_f16
    }

    pub fn device_traits(&self) -> crate::ops::wgsl::DeviceTraits {
        let (limits, info) = (&self.inner.limits, &self.inner.adapter_info);
        crate::ops::wgsl::DeviceTraits {
            // A browser reports SwiftShader as a fallback adapter only when it is one; its name says so.
            cpu: info.device_type == wgpu::DeviceType::Cpu
                || ["swiftshader", "llvmpipe", "lavapipe"].iter().any(|n| info.name.to_lowercase().contains(n)),
            workgroup_storage: limits.max_compute_workgroup_storage_size,
            invocations: limits.max_compute_invocations_per_workgroup,
            subgroups: self.inner.subgroups,
        }
    }

    pub fn has_subgroups(&self) -> bool {
        self.inner.subgroups
    }

    /// `MLContext.accelerated`: false on a software adapter.
    pub fn accelerated(&self) -> bool {
        !Context::is_software(&self.inner.adapter_info)
    }

    pub fn options(&self) -> &ContextOptions {
        &self.inner.options
    }

    /// The registry counting this context's device buffers.
    pub fn buffers(&self) -> &BufferRegistry {
        &self.inner.registry
    }

    /// The counter host copies of this context's constants add to.
    pub fn host_byte_counter(&self) -> &Rc<Cell<u64>> {
        &self.inner.memory.host_bytes
    }

    /// `memoryInfo()`: device bytes are the registry's live buffers at this moment.
    pub fn memory_info(&self) -> MemoryInfo {
        let m = &self.inner.memory;
        MemoryInfo {
            device_bytes: self.inner.registry.live_bytes(),
            host_bytes: m.host_bytes.get(),
            budget_bytes: m.budget.get(),
            swap_ins: m.swap_ins.get(),
            swap_outs: m.swap_outs.get(),
            bytes_uploaded: m.bytes_uploaded.get(),
            bytes_streamed_from_disk: m.bytes_streamed_from_disk.get(),
        }
    }

    /// Number of compiled pipelines in the cache.
    pub fn pipeline_count(&self) -> usize {
        self.inner.pipelines.len()
    }

    /// The last GPU error that happened outside an error scope, if any, cleared on read.
    pub fn take_uncaptured_error(&self) -> Option<String> {
        self.inner.last_uncaptured_error.lock().ok().and_then(|mut e| e.take())
    }

    pub fn lost_message(&self) -> Option<String> {
        self.inner.lost.get()
    }

    pub fn is_lost(&self) -> bool {
        self.inner.lost.get().is_some()
    }

    /// Resolves with the loss message once the context is lost (`MLContext.lost`).
    pub fn lost(&self) -> impl std::future::Future<Output = String> {
        self.inner.lost.wait()
    }

    /// `destroy()`: loses the context; its graphs and tensors stop working.
    pub fn destroy(&self) {
        if self.is_lost() {
            return;
        }
        self.inner.lost.set("the MLContext was destroyed with destroy()".into());
        self.inner.device.destroy();
    }

    /// Fails with a `TypeError` naming the limit when a tensor's byte length is over
    /// `maxTensorByteLength` (the spec's "check dimensions"). The limit is a multiple of 4, so
    /// the tensor's buffer, rounded up to whole words, fits too.
    pub fn check_tensor_byte_length(&self, descriptor: &OperandDescriptor) -> Result<()> {
        descriptor.check_byte_length_limit(self.max_tensor_byte_length())
    }

    /// `opSupportLimits().maxTensorByteLength`: what one buffer bound whole to one storage binding
    /// can hold (the device's maxBufferSize and maxStorageBufferBindingSize, the adapter's as
    /// requested), less [`ALLOCATION_HEADROOM`], in whole 4-byte words.
    pub fn max_tensor_byte_length(&self) -> u64 {
        let limits = &self.inner.limits;
        let binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        binding.saturating_sub(ALLOCATION_HEADROOM) / 4 * 4
    }

    pub(super) fn check_not_lost(&self) -> Result<()> {
        match self.inner.lost.get() {
            Some(message) => Err(Error::InvalidState(message)),
            None => Ok(()),
        }
    }

    pub(crate) fn next_tensor_id(&self) -> u64 {
        let id = self.inner.next_tensor_id.get();
        self.inner.next_tensor_id.set(id + 1);
        id
    }
}

impl crate::graph::BuilderContext for Context {
    fn is_lost(&self) -> bool {
        Context::is_lost(self)
    }

    fn check_tensor_byte_length(&self, descriptor: &OperandDescriptor) -> Result<()> {
        Context::check_tensor_byte_length(self, descriptor)
    }

    fn host_byte_counter(&self) -> &Rc<Cell<u64>> {
        Context::host_byte_counter(self)
    }
}
