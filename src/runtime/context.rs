//! `MLContext`'s core: the wgpu device with the adapter's real limits and features, its buffer
//! registry and pipeline cache, tensors, reads and writes, dispatch, and loss.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::memory::{HostBytes, MemoryInfo, MemoryState, SharedConstant};
use crate::ops::wgsl::buffer_size;
use crate::weights::LocalFuture;
use crate::runtime::buffer::{BufferRegistry, DeviceBuffer};
use crate::runtime::oneshot::{self, Signal};
use crate::runtime::pipeline::PipelineCache;
use crate::runtime::tensor::{Tensor, TensorDescriptor};

/// `MLPowerPreference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PowerPreference {
    #[default]
    Default,
    HighPerformance,
    LowPower,
}

/// `MLContextOptions`, with the `memoryBudget` extension.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    pub power_preference: PowerPreference,
    pub accelerated: bool,
    /// Device bytes the context may hold before evicting least recently used graphs.
    pub memory_budget: Option<u64>,
    /// Host bytes of copies the context may keep of constants streamed from weight files, so
    /// that an evicted graph comes back from host memory instead of its file (`"host"` tier).
    pub host_memory_budget: Option<u64>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            power_preference: PowerPreference::Default,
            accelerated: true,
            memory_budget: None,
            host_memory_budget: None,
        }
    }
}

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
    pub write_fence: crate::weights::stream::WriteFence,
    /// The file streams running at once, and those waiting for a lane.
    pub lanes: Rc<crate::weights::lanes::Lanes>,
    /// Copies and compute passes the next submission records before its own work (see
    /// [`PendingCopy`], [`PendingPass`]).
    pending_copies: RefCell<Vec<PendingCopy>>,
    pending_passes: RefCell<Vec<PendingPass>>,
    /// The weight loader's host buffers (a chunk as read, and converted), reused between streams.
    pub loader_buffers: Cell<(Vec<u8>, Vec<u8>)>,
    lost: Signal,
    deferred: Deferred,
    last_uncaptured_error: Arc<Mutex<Option<String>>>,
    next_tensor_id: Cell<u64>,
    /// Test-only fault injection: allocations inside an [`AllocationScope`] still to report
    /// out of memory, and how many did so far.
    failing_allocations: Cell<u32>,
    injected_failures: Cell<u64>,
    open_allocation_scopes: Cell<u32>,
    /// Allocations waiting for the GPU's verdict, and what waits for none to be left.
    unconfirmed: Tally,
    /// `constantTensor(name, {wait: false})` calls whose stream is not queued yet: a batch of
    /// queued streams waits for them to join it, and the lanes split them (see `weights::lanes`).
    queuing_streams: Tally,
}

/// A compute pass queued by the weight loader (float16 widened on the GPU from a staging
/// buffer): the next submission, whichever it is (a dispatch, a read, the loader's own marker),
/// records it first, so a swap-in adds no submission of its own.
pub(crate) struct PendingPass {
    pub pipeline: Rc<crate::runtime::pipeline::Pipeline>,
    pub group: wgpu::BindGroup,
    pub grid: [u32; 2],
    /// Held (and counted in the device bytes) until the pass is recorded; the GPU keeps it
    /// alive until the pass has run.
    pub _staging: DeviceBuffer,
}

/// A copy from a host copy (see [`HostCache`](crate::memory::HostCache)) into a constant's
/// buffer, queued for the next submission.
pub(crate) struct PendingCopy {
    pub from: wgpu::Buffer,
    pub to: wgpu::Buffer,
    pub size: u64,
}

/// Queue work waiting behind a stream from a weight file, run in call order.
pub(crate) enum DeferredOp {
    Await(Pin<Box<dyn Future<Output = Result<()>>>>),
    Run(Box<dyn FnOnce() -> Result<()>>),
    /// A stream into a constant's own buffer: streams queued one after the other run together
    /// (their file reads share the context's lanes, see `weights::lanes`), as nothing else can
    /// use those buffers before all of them are done.
    Stream(LocalFuture<'static, Result<()>>),
}

/// Work deferred behind a re-stream: a dispatch of a graph whose constants come back from the
/// `"disk"` tier is recorded once they are streamed, and the writes and dispatches after it
/// wait in the same order; reads wait until it is all done.
#[derive(Default)]
struct Deferred {
    ops: RefCell<VecDeque<DeferredOp>>,
    busy: Cell<bool>,
    idle: RefCell<Vec<oneshot::Sender<()>>>,
    /// The first failure of deferred work, reported by the next `readTensor`.
    error: RefCell<Option<Error>>,
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

impl Context {
    /// `ML.createContext(options)`: requests an adapter and a device with the adapter's limits
    /// and its `shader-f16` and subgroup features when present.
    pub async fn new(options: ContextOptions) -> Result<Context> {
        let instance = shared_instance();
        let power_preference = match options.power_preference {
            PowerPreference::Default => wgpu::PowerPreference::None,
            PowerPreference::HighPerformance => wgpu::PowerPreference::HighPerformance,
            PowerPreference::LowPower => wgpu::PowerPreference::LowPower,
        };
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::NotSupported(format!("no WebGPU adapter is available: {e}")))?;
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
                deferred: Deferred::default(),
                last_uncaptured_error,
                next_tensor_id: Cell::new(1),
                failing_allocations: Cell::new(0),
                injected_failures: Cell::new(0),
                open_allocation_scopes: Cell::new(0),
                unconfirmed: Tally::default(),
                queuing_streams: Tally::default(),
            }),
        }
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

    pub fn accelerated(&self) -> bool {
        self.inner.options.accelerated
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

    /// Evicts least recently used graphs (other than graph `except`) until `needed()` more bytes
    /// fit the budget; `QuotaExceededError` when they cannot.
    pub(crate) fn make_room(&self, except: u64, needed: &dyn Fn() -> u64) -> Result<()> {
        let memory = &self.inner.memory;
        let Some(budget) = memory.budget.get() else { return Ok(()) };
        loop {
            let need = needed();
            let live = self.inner.registry.live_bytes() - self.inner.registry.recycled_bytes();
            if live + need <= budget {
                return Ok(());
            }
            let order = memory.eviction_order(except);
            let Some(victim) = order.first() else {
                return Err(Error::QuotaExceeded(format!(
                    "{need} more device bytes are needed but the memory budget is {budget} bytes and {live} bytes are held by tensors and resident graphs that cannot be evicted"
                )));
            };
            victim.evict();
            memory.pool.trim(&memory.resident_slot_needs());
        }
    }

    /// Evicts the least recently used resident graph other than graph `except`, for an
    /// allocation the GPU could not satisfy; `false` when no graph is left to evict.
    fn evict_one(&self, except: u64) -> bool {
        let memory = &self.inner.memory;
        let Some(victim) = memory.eviction_order(except).into_iter().next() else { return false };
        victim.evict();
        memory.pool.trim(&memory.resident_slot_needs());
        true
    }

    /// Opens an out-of-memory error scope around synchronous buffer creations.
    pub(crate) fn allocation_scope(&self) -> AllocationScope {
        let inner = &self.inner;
        inner.open_allocation_scopes.set(inner.open_allocation_scopes.get() + 1);
        AllocationScope {
            scope: inner.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
            injected_before: inner.injected_failures.get(),
            context: self.clone(),
        }
    }

    /// Runs `attempt`, whose buffer creations are synchronous, inside an out-of-memory error
    /// scope and returns its result with the scope's verdict, which comes after a GPU round trip
    /// (a later task on the web). `shared`: the attempt may replace buffers that other graphs
    /// bind (the pool's), so no dispatch is recorded until the verdict is in.
    pub(crate) fn try_allocate<T>(&self, shared: bool, attempt: impl FnOnce() -> Result<T>) -> Attempt<T> {
        let last = self.inner.registry.last_id();
        let unconfirmed = shared.then(|| Unconfirmed::new(self));
        let scope = self.allocation_scope();
        let result = attempt();
        let verdict = scope.close();
        // Nothing created (buffers reused): nothing can be out of memory, no round trip to wait for.
        if self.inner.registry.last_id() == last {
            return Attempt { result, out_of_memory: Box::pin(std::future::ready(None)), unconfirmed: None };
        }
        Attempt { result, out_of_memory: Box::pin(verdict), unconfirmed }
    }

    /// Waits for an attempt's verdict. When the GPU was out of memory, `undo` frees what the
    /// attempt allocated, the least recently used graph that is resident and not in flight
    /// (other than graph `except`) is evicted, and `attempt` runs again, one eviction at a time;
    /// with no graph left to evict the result is `exhausted(message)`.
    pub(crate) async fn confirm_allocation<T>(
        &self,
        first: Attempt<T>,
        except: u64,
        mut attempt: impl FnMut() -> Result<T>,
        mut undo: impl FnMut(T),
        exhausted: impl FnOnce(String) -> Error,
    ) -> Result<T> {
        let mut pending = first;
        loop {
            let Attempt { result, out_of_memory, unconfirmed } = pending;
            let shared = unconfirmed.is_some();
            let out_of_memory = out_of_memory.await;
            let value = result?;
            let Some(message) = out_of_memory else { return Ok(value) };
            undo(value);
            drop(unconfirmed);
            if !self.evict_one(except) {
                return Err(exhausted(message));
            }
            pending = self.try_allocate(shared, &mut attempt);
        }
    }

    /// Counts one buffer creation for [`fail_next_allocations`](Self::fail_next_allocations).
    pub(crate) fn inject_allocation_failure(&self) {
        let inner = &self.inner;
        if inner.open_allocation_scopes.get() > 0 && inner.failing_allocations.get() > 0 {
            inner.failing_allocations.set(inner.failing_allocations.get() - 1);
            inner.injected_failures.set(inner.injected_failures.get() + 1);
        }
    }

    /// Test-only fault injection: the next `n` buffer creations inside an allocation check
    /// report out of memory, as a GPU that ran out would (the buffers are still created, and
    /// freed by the failure path). Real exhaustion cannot be provoked safely in tests.
    #[doc(hidden)]
    pub fn fail_next_allocations(&self, n: u32) {
        self.inner.failing_allocations.set(n);
    }

    /// Whether allocations wait for the GPU's verdict: until then no work may bind the pool's
    /// buffers, which an allocation may have replaced.
    pub(crate) fn has_unconfirmed_allocations(&self) -> bool {
        self.inner.unconfirmed.busy()
    }

    /// Resolves once no allocation waits for its verdict.
    pub(crate) async fn allocations_confirmed(&self) {
        self.inner.unconfirmed.idle().await
    }

    /// Held by a `constantTensor(name, {wait: false})` call until it queues its stream
    /// ([`stream_in_background`](Self::stream_in_background)), so that calls made together
    /// (`Promise.all`) stream in one batch of lanes rather than one after the other.
    pub fn queuing_stream(&self) -> QueuingStream {
        self.inner.queuing_streams.enter();
        QueuingStream(self.clone())
    }

    /// Queues a copy for the next submission.
    pub(crate) fn queue_copy(&self, copy: PendingCopy) {
        self.inner.registry.defer_destruction();
        self.inner.pending_copies.borrow_mut().push(copy);
    }

    /// Queues a pass for the next submission.
    pub(crate) fn queue_pass(&self, pass: PendingPass) {
        self.inner.registry.defer_destruction();
        self.inner.pending_passes.borrow_mut().push(pass);
    }

    /// Records the pending passes into `encoder`, ahead of the caller's commands; every
    /// submission goes through here. The caller drops what this returns (their staging buffers,
    /// and buffers dropped while they waited) after submitting: a buffer destroyed before the
    /// submission would invalidate it.
    #[must_use]
    pub(crate) fn record_pending(&self, encoder: &mut wgpu::CommandEncoder) -> (Vec<PendingPass>, Vec<wgpu::Buffer>) {
        self.inner.write_fence.submitted();
        let passes = std::mem::take(&mut *self.inner.pending_passes.borrow_mut());
        let kept = self.inner.registry.end_deferral();
        for c in self.inner.pending_copies.borrow_mut().drain(..) {
            encoder.copy_buffer_to_buffer(&c.from, 0, &c.to, 0, c.size);
        }
        if passes.is_empty() {
            return (passes, kept);
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("pending"), timestamp_writes: None });
        for p in &passes {
            pass.set_pipeline(&p.pipeline.pipeline);
            pass.set_bind_group(0, &p.group, &[]);
            pass.dispatch_workgroups(p.grid[0], p.grid[1], 1);
        }
        drop(pass);
        (passes, kept)
    }

    /// Submits the pending passes (or nothing): a point in queue order to wait for.
    pub(crate) fn submit_pending(&self) -> wgpu::SubmissionIndex {
        let mut encoder = self.inner.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("pending") });
        let recorded = self.record_pending(&mut encoder);
        let index = self.inner.queue.submit([encoder.finish()]);
        drop(recorded);
        index
    }

    /// Whether queue work is waiting behind a stream (always `false` natively after a call).
    pub(crate) fn is_deferring(&self) -> bool {
        self.inner.deferred.busy.get()
    }

    /// Queues `op` behind the deferred work, starting it if idle.
    pub(crate) fn defer(&self, op: DeferredOp) {
        let deferred = &self.inner.deferred;
        deferred.ops.borrow_mut().push_back(op);
        if !deferred.busy.replace(true) {
            spawn(drive(self.clone()));
        }
    }

    /// Streams a pending file-backed constant (see `WeightFile::pending_constant_tensor`) as
    /// deferred queue work: writes and dispatches queued after this call wait for it, and a
    /// failure is reported by the next `readTensor`. Natively it completes within the call.
    pub fn stream_in_background(
        &self,
        constant: Rc<crate::memory::SharedConstant>,
        mut progress: Box<dyn FnMut(u64, u64)>,
    ) {
        let context = self.clone();
        self.defer(DeferredOp::Stream(Box::pin(async move {
            constant.stream(&context, &mut *progress).await.map(|_| ())
        })));
    }

    /// Resolves once no work is deferred.
    pub(crate) async fn settled(&self) {
        if self.is_deferring() {
            let (sender, receiver) = oneshot::channel();
            self.inner.deferred.idle.borrow_mut().push(sender);
            receiver.await;
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
        let max = self.max_tensor_byte_length();
        let size = descriptor.byte_length();
        if size > max {
            return Err(Error::Type(format!("{descriptor} has {size} bytes, more than maxTensorByteLength ({max} bytes)")));
        }
        Ok(())
    }

    /// `opSupportLimits().maxTensorByteLength`: what one buffer bound whole to one storage binding
    /// can hold (the device's maxBufferSize and maxStorageBufferBindingSize, the adapter's as
    /// requested), less [`ALLOCATION_HEADROOM`], in whole 4-byte words.
    pub fn max_tensor_byte_length(&self) -> u64 {
        let limits = &self.inner.limits;
        let binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        binding.saturating_sub(ALLOCATION_HEADROOM) / 4 * 4
    }

    fn check_not_lost(&self) -> Result<()> {
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

    /// Creates a registered storage buffer. When the GPU is out of memory, least recently used
    /// graphs are evicted one at a time and the allocation retried; with none left it is an
    /// `UnknownError` (the spec's error when a tensor's data cannot be created).
    pub async fn create_buffer(&self, size: u64, label: &str) -> Result<DeviceBuffer> {
        let attempt = || {
            let validation = self.inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let buffer = self.create_buffer_unchecked(size, label);
            Ok((buffer, validation.pop()))
        };
        let (buffer, invalid) = self
            .confirm_allocation(self.try_allocate(false, attempt), 0, attempt, drop, |e| {
                Error::Unknown(format!("GPU allocation of {size} bytes failed: {e}"))
            })
            .await?;
        if let Some(e) = invalid.await {
            return Err(Error::Unknown(format!("GPU buffer of {size} bytes could not be created: {e}")));
        }
        Ok(buffer)
    }

    /// A storage buffer and the check of its allocation, which resolves after a GPU round trip:
    /// the caller can queue writes to the buffer meanwhile (the weight loader streams into it)
    /// and awaits the check before handing the buffer out. The error scopes cover only the
    /// creation.
    pub fn create_buffer_checked_later(
        &self,
        size: u64,
        label: &str,
    ) -> (DeviceBuffer, impl Future<Output = Result<()>> + 'static) {
        let scope = self.allocation_scope();
        let validation = self.inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.create_buffer_unchecked(size, label);
        let invalid = validation.pop();
        let oom = scope.close();
        let check = async move {
            let invalid = invalid.await;
            if let Some(e) = oom.await {
                return Err(Error::Unknown(format!("GPU allocation of {size} bytes failed: {e}")));
            }
            if let Some(e) = invalid {
                return Err(Error::Unknown(format!("GPU buffer of {size} bytes could not be created: {e}")));
            }
            Ok(())
        };
        (buffer, check)
    }

    /// Creates a registered storage buffer without waiting for allocation errors.
    pub(crate) fn create_buffer_unchecked(&self, size: u64, label: &str) -> DeviceBuffer {
        self.inject_allocation_failure();
        let buffer = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        DeviceBuffer::new(buffer, &self.inner.registry)
    }

    /// `createTensor(descriptor)`.
    pub async fn create_tensor(&self, descriptor: TensorDescriptor) -> Result<Tensor> {
        self.check_not_lost()?;
        descriptor.operand.check_dimensions()?;
        self.check_tensor_byte_length(&descriptor.operand)?;
        let size = buffer_size(&descriptor.operand);
        self.make_room(0, &|| size)?;
        let buffer = self.create_buffer(size, "MLTensor").await?;
        Ok(Tensor::new(self, descriptor, buffer))
    }

    /// `createConstantTensor(descriptor, inputData)`.
    pub async fn create_constant_tensor(&self, descriptor: OperandDescriptor, bytes: &[u8]) -> Result<Tensor> {
        self.check_not_lost()?;
        descriptor.check_dimensions()?;
        self.check_tensor_byte_length(&descriptor)?;
        check_byte_length(&descriptor, bytes.len())?;
        let host = HostBytes::from_slice(bytes, self.host_byte_counter());
        self.create_constant_tensor_host(descriptor, host).await
    }

    /// `createConstantTensor` from a host copy the caller made (JS-owned on the web).
    pub async fn create_constant_tensor_host(&self, descriptor: OperandDescriptor, host: HostBytes) -> Result<Tensor> {
        self.check_not_lost()?;
        descriptor.check_dimensions()?;
        self.check_tensor_byte_length(&descriptor)?;
        check_byte_length(&descriptor, host.len() as usize)?;
        let size = buffer_size(&descriptor);
        self.make_room(0, &|| size)?;
        let constant = Rc::new(SharedConstant::new(size, host));
        let attempt = || constant.make_resident(self);
        let uploaded = self
            .confirm_allocation(self.try_allocate(false, attempt), 0, attempt, |_| constant.release(), |e| {
                Error::Unknown(format!("GPU allocation of {size} bytes failed: {e}"))
            })
            .await?;
        self.inner.memory.bytes_uploaded.set(self.inner.memory.bytes_uploaded.get() + uploaded);
        let descriptor = TensorDescriptor { operand: descriptor, readable: false, writable: false };
        Ok(Tensor::new_constant(self, descriptor, constant))
    }

    fn check_tensor(&self, tensor: &Tensor) -> Result<()> {
        if !tensor.context().same(self) {
            return Err(Error::Type("the MLTensor belongs to another MLContext".into()));
        }
        if tensor.is_destroyed() {
            return Err(Error::Type("the MLTensor is destroyed".into()));
        }
        Ok(())
    }

    /// `writeTensor(tensor, inputData)`: validates synchronously, then queues the write.
    pub fn write_tensor(&self, tensor: &Tensor, bytes: &[u8]) -> Result<()> {
        self.check_tensor(tensor)?;
        if !tensor.writable() {
            return Err(Error::Type("the MLTensor was not created writable".into()));
        }
        check_byte_length(tensor.descriptor(), bytes.len())?;
        if self.is_lost() {
            return Ok(());
        }
        if let Some(buffer) = tensor.buffer() {
            if self.is_deferring() {
                let (context, bytes) = (self.clone(), bytes.to_vec());
                self.defer(DeferredOp::Run(Box::new(move || {
                    crate::memory::host::write_padded(&context.inner.queue, &buffer.buffer, 0, &bytes);
                    Ok(())
                })));
            } else {
                crate::memory::host::write_padded(&self.inner.queue, &buffer.buffer, 0, bytes);
            }
        }
        Ok(())
    }

    /// The synchronous checks of `readTensor`; `expected_len` is the BYOB buffer's length.
    pub fn check_read(&self, tensor: &Tensor, expected_len: Option<usize>) -> Result<()> {
        self.check_tensor(tensor)?;
        if !tensor.readable() {
            return Err(Error::Type("the MLTensor was not created readable".into()));
        }
        if let Some(len) = expected_len {
            check_byte_length(tensor.descriptor(), len)?;
        }
        Ok(())
    }

    /// `readTensor(tensor)`: the tensor's bytes as the work issued before this call left them.
    /// The copy is issued now, in call order with the writes and dispatches around it (the spec's
    /// timeline); only the wait for the mapping is asynchronous. Behind deferred work (a stream
    /// from a weight file), the copy is queued in order with it.
    pub fn read_tensor(&self, tensor: &Tensor) -> impl Future<Output = Result<Vec<u8>>> + 'static {
        let context = self.clone();
        let tensor = tensor.clone();
        let issued = self.issue_read(&tensor);
        async move {
            let pending = match issued? {
                Issued::Now(pending) => pending,
                Issued::Deferred(receiver) => receiver.await?,
            };
            let bytes = context.finish_read(pending).await?;
            if tensor.is_destroyed() {
                return Err(Error::InvalidState("the MLTensor was destroyed while being read".into()));
            }
            Ok(bytes[..tensor.descriptor().byte_length() as usize].to_vec())
        }
    }

    fn issue_read(&self, tensor: &Tensor) -> Result<Issued> {
        self.check_read(tensor, None)?;
        if !self.is_deferring() {
            if let Some(e) = self.inner.deferred.error.borrow_mut().take() {
                return Err(e);
            }
            return self.start_tensor_read(tensor).map(Issued::Now);
        }
        let (sender, receiver) = oneshot::channel();
        let (context, tensor) = (self.clone(), tensor.clone());
        self.defer(DeferredOp::Run(Box::new(move || {
            let failed = context.inner.deferred.error.borrow_mut().take();
            sender.send(match failed {
                Some(e) => Err(e),
                None => context.start_tensor_read(&tensor),
            });
            Ok(())
        })));
        Ok(Issued::Deferred(receiver))
    }

    fn start_tensor_read(&self, tensor: &Tensor) -> Result<PendingRead> {
        self.check_not_lost()?;
        let buffer = tensor.buffer().ok_or_else(|| Error::InvalidState("the MLTensor is destroyed".into()))?;
        Ok(self.start_read(&buffer.buffer, buffer.size))
    }

    /// Copies a buffer to a mappable one and starts mapping it. The staging buffer is created
    /// inside an out-of-memory scope whose verdict [`finish_read`](Self::finish_read) awaits.
    fn start_read(&self, buffer: &wgpu::Buffer, size: u64) -> PendingRead {
        let device = &self.inner.device;
        let scope = self.allocation_scope();
        self.inject_allocation_failure();
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readTensor staging"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let out_of_memory = Box::pin(scope.close());
        // Pending dispatches go in a submission of their own: a staging buffer the GPU could not
        // allocate invalidates the submission that copies into it.
        if self.has_pending_work() {
            self.submit_pending();
        }
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("readTensor") });
        let recorded = self.record_pending(&mut encoder);
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.inner.queue.submit([encoder.finish()]);
        drop(recorded);
        let (sender, mapped) = oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| sender.send(result));
        PendingRead { staging, mapped, out_of_memory }
    }

    fn has_pending_work(&self) -> bool {
        !self.inner.pending_passes.borrow().is_empty() || !self.inner.pending_copies.borrow().is_empty()
    }

    /// Waits for a started read and returns the bytes.
    async fn finish_read(&self, pending: PendingRead) -> Result<Vec<u8>> {
        let PendingRead { staging, mapped, out_of_memory } = pending;
        // Native backends deliver the callback from poll(); on the web this is a no-op. Natively,
        // non-blocking polls come first for a short while: a blocking wait returns 20-25 µs after
        // the GPU is done (H200, Vulkan), as much as a whole read costs when the work before it
        // is short, as in token-by-token decoding. Not on a CPU adapter, whose work runs on the
        // cores the polling would take.
        #[cfg(not(target_arch = "wasm32"))]
        if self.inner.adapter_info.device_type != wgpu::DeviceType::Cpu {
            let start = std::time::Instant::now();
            while !mapped.is_ready() && start.elapsed() < READ_SPIN {
                let _ = self.inner.device.poll(wgpu::PollType::Poll);
                std::hint::spin_loop();
            }
        }
        if !mapped.is_ready() {
            let _ = self.inner.device.poll(wgpu::PollType::wait_indefinitely());
        }
        let mapped = mapped.await;
        let out_of_memory = out_of_memory.await;
        if let Some(message) = self.inner.lost.get() {
            return Err(Error::InvalidState(message));
        }
        // Not retried: the copy was the tensor's state when the read was issued, and later work
        // may have changed it since. The tensor keeps its bytes; a later read can succeed.
        if let Some(e) = out_of_memory {
            staging.destroy();
            return Err(Error::Unknown(format!("GPU allocation of {} bytes to read the tensor failed: {e}", staging.size())));
        }
        if let Err(e) = mapped {
            // A mapping fails when the device is being lost, and the loss is reported a moment
            // later: a read pending at the loss is an InvalidStateError, as the spec's tensor
            // destruction on loss makes it.
            if let Some(message) = self.loss_after_failure().await {
                return Err(Error::InvalidState(message));
            }
            return Err(Error::Unknown(format!("reading the tensor failed: {e}")));
        }
        let bytes = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Unknown(format!("reading the tensor failed: {e}")))?
            .to_vec();
        staging.unmap();
        staging.destroy();
        Ok(bytes)
    }

    /// The loss message if the context is lost now or within about 200 ms.
    async fn loss_after_failure(&self) -> Option<String> {
        for _ in 0..20 {
            if let Some(message) = self.inner.lost.get() {
                return Some(message);
            }
            pause_ms(10).await;
        }
        self.inner.lost.get()
    }

    /// Copies a buffer to a mappable one and maps it.
    pub(crate) async fn read_buffer(&self, buffer: &wgpu::Buffer, size: u64) -> Result<Vec<u8>> {
        let pending = self.start_read(buffer, size);
        self.finish_read(pending).await
    }

    /// Waits until the GPU has finished all submitted work (native); on the web, a read
    /// round-trip gives the same guarantee.
    pub async fn flush(&self) -> Result<()> {
        self.settled().await;
        let probe = self.create_buffer_unchecked(4, "flush");
        self.read_buffer(&probe.buffer, 4).await.map(|_| ())
    }
}

/// An out-of-memory error scope around buffer creations; injected failures count as errors.
pub(crate) struct AllocationScope {
    scope: wgpu::ErrorScopeGuard,
    injected_before: u64,
    context: Context,
}

impl AllocationScope {
    /// Pops the scope: resolves to the out-of-memory message, if any.
    pub(crate) fn close(self) -> impl Future<Output = Option<String>> + 'static {
        let inner = &self.context.inner;
        inner.open_allocation_scopes.set(inner.open_allocation_scopes.get().saturating_sub(1));
        let injected = inner.injected_failures.get() > self.injected_before;
        let popped = self.scope.pop();
        async move {
            let error = popped.await.map(|e| e.to_string());
            error.or_else(|| injected.then(|| "out of memory (injected by fail_next_allocations)".to_string()))
        }
    }
}

/// Synchronous allocations and the pending verdict of their error scope.
pub(crate) struct Attempt<T> {
    pub result: Result<T>,
    pub out_of_memory: Pin<Box<dyn Future<Output = Option<String>>>>,
    pub unconfirmed: Option<Unconfirmed>,
}

/// A count of things in progress, and what waits for none to be left.
#[derive(Default)]
struct Tally {
    count: Cell<u32>,
    idle: RefCell<Vec<oneshot::Sender<()>>>,
}

impl Tally {
    fn enter(&self) {
        self.count.set(self.count.get() + 1);
    }

    fn leave(&self) {
        self.count.set(self.count.get().saturating_sub(1));
        if self.count.get() == 0 {
            let waiting = std::mem::take(&mut *self.idle.borrow_mut());
            waiting.into_iter().for_each(|w| w.send(()));
        }
    }

    fn busy(&self) -> bool {
        self.count.get() > 0
    }

    async fn idle(&self) {
        while self.busy() {
            let (sender, receiver) = oneshot::channel();
            self.idle.borrow_mut().push(sender);
            receiver.await;
        }
    }
}

/// An allocation waiting for its verdict; dropping it wakes what waits for none to be left.
pub(crate) struct Unconfirmed(Context);

impl Unconfirmed {
    fn new(context: &Context) -> Unconfirmed {
        context.inner.unconfirmed.enter();
        Unconfirmed(context.clone())
    }
}

impl Drop for Unconfirmed {
    fn drop(&mut self) {
        self.0.inner.unconfirmed.leave();
    }
}

/// See [`Context::queuing_stream`]; dropped before the stream is queued or on failure.
pub struct QueuingStream(Context);

impl Drop for QueuingStream {
    fn drop(&mut self) {
        self.0.inner.queuing_streams.leave();
    }
}

/// A read whose copy is submitted, waiting for its staging buffer to map.
/// How long a native read polls without blocking before it waits.
#[cfg(not(target_arch = "wasm32"))]
const READ_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

struct PendingRead {
    staging: wgpu::Buffer,
    mapped: oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    /// The verdict of the staging buffer's out-of-memory scope.
    out_of_memory: Pin<Box<dyn Future<Output = Option<String>>>>,
}

/// A read issued at once, or queued behind deferred work.
enum Issued {
    Now(PendingRead),
    Deferred(oneshot::Receiver<Result<PendingRead>>),
}

/// The spec's "validating buffer with descriptor": the byte length must match exactly.
pub fn check_byte_length(descriptor: &OperandDescriptor, len: usize) -> Result<()> {
    if len as u64 != descriptor.byte_length() {
        return Err(Error::Type(format!(
            "the buffer holds {len} bytes but {descriptor} needs {}",
            descriptor.byte_length()
        )));
    }
    Ok(())
}

/// Runs the deferred work in order until none is left, then wakes what waits for it.
async fn drive(context: Context) {
    let deferred = &context.inner.deferred;
    loop {
        if matches!(deferred.ops.borrow().front(), Some(DeferredOp::Stream(..))) {
            // Calls made together queue their streams in turn: the batch takes them all.
            context.inner.queuing_streams.idle().await;
            let mut batch = Vec::new();
            let mut ops = deferred.ops.borrow_mut();
            while matches!(ops.front(), Some(DeferredOp::Stream(..))) {
                if let Some(DeferredOp::Stream(future)) = ops.pop_front() {
                    batch.push(future);
                }
            }
            drop(ops);
            for e in join_all(batch).await {
                deferred.error.borrow_mut().get_or_insert(e);
            }
            continue;
        }
        let op = deferred.ops.borrow_mut().pop_front();
        let result = match op {
            None => break,
            Some(DeferredOp::Await(future)) => future.await,
            Some(DeferredOp::Run(f)) => f(),
            Some(DeferredOp::Stream(future)) => future.await,
        };
        if let Err(e) = result {
            deferred.error.borrow_mut().get_or_insert(e);
        }
    }
    deferred.busy.set(false);
    let waiting = std::mem::take(&mut *deferred.idle.borrow_mut());
    waiting.into_iter().for_each(|w| w.send(()));
}

/// Runs `futures` together; returns their errors.
async fn join_all(futures: Vec<LocalFuture<'static, Result<()>>>) -> Vec<Error> {
    let mut running: Vec<Option<LocalFuture<'static, Result<()>>>> = futures.into_iter().map(Some).collect();
    let mut errors = Vec::new();
    std::future::poll_fn(|cx| {
        for slot in running.iter_mut() {
            if let Some(future) = slot {
                if let std::task::Poll::Ready(result) = future.as_mut().poll(cx) {
                    errors.extend(result.err());
                    *slot = None;
                }
            }
        }
        if running.iter().all(Option::is_none) { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
    errors
}

/// Yields to the event loop for `ms` milliseconds (`setTimeout` of the window or worker).
#[cfg(target_arch = "wasm32")]
async fn pause_ms(ms: i32) {
    use wasm_bindgen::JsCast;
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let global = js_sys::global();
        let timer = js_sys::Reflect::get(&global, &"setTimeout".into()).ok().and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        let scheduled = timer.map(|f| f.call2(&global, &resolve, &ms.into()).is_ok()).unwrap_or(false);
        if !scheduled {
            let _ = resolve.call0(&wasm_bindgen::JsValue::UNDEFINED);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Natively the loss callback comes from the device (at destroy or in a poll): a short sleep.
#[cfg(not(target_arch = "wasm32"))]
async fn pause_ms(ms: i32) {
    std::thread::sleep(std::time::Duration::from_millis(ms as u64));
}

/// Native sources complete at once, so deferred work runs to the end inside the call.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn spawn(future: impl Future<Output = ()> + 'static) {
    pollster::block_on(future);
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn spawn(future: impl Future<Output = ()> + 'static) {
    wasm_bindgen_futures::spawn_local(future);
}
