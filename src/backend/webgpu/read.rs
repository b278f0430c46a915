//! `readTensor`: a copy to a mappable staging buffer issued in call order with the work around
//! it, the mapping awaited, and the failures (out of memory, loss) reported as the spec's errors.

use std::future::Future;
use std::pin::Pin;

use crate::error::{Error, Result};
use crate::backend::webgpu::context::Context;
use crate::backend::oneshot;
use crate::backend::webgpu::queue::DeferredOp;
use crate::backend::check_byte_length;
use crate::backend::webgpu::tensor::Tensor;

impl Context {
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

    /// Copies a buffer to a mappable one and starts mapping it. A small read reuses a free
    /// staging buffer of its size (see [`STAGING_POOL_BYTES`]); otherwise the staging buffer is
    /// created inside an out-of-memory scope whose verdict [`finish_read`](Self::finish_read)
    /// awaits.
    fn start_read(&self, buffer: &wgpu::Buffer, size: u64) -> PendingRead {
        let device = &self.inner.device;
        let pooled = {
            let mut free = self.inner.free_staging.borrow_mut();
            free.iter().position(|b| b.size() == size).map(|i| free.swap_remove(i))
        };
        let (staging, out_of_memory): (_, Pin<Box<dyn Future<Output = Option<String>>>>) = match pooled {
            Some(staging) => (staging, Box::pin(std::future::ready(None))),
            None => {
                let scope = self.allocation_scope();
                self.inject_allocation_failure();
                let staging = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("readTensor staging"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                (staging, Box::pin(scope.close()))
            }
        };
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
        let mut free = self.inner.free_staging.borrow_mut();
        if size_of_pooled(&free) + staging.size() <= STAGING_POOL_BYTES {
            free.push(staging);
        } else {
            staging.destroy();
        }
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

/// How long a native read polls without blocking before it waits.
#[cfg(not(target_arch = "wasm32"))]
const READ_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// Bytes of free staging buffers a context keeps for later reads of the same size. Creating a
/// mappable buffer for each read made a small read several times slower than a plain WebGPU copy
/// and mapAsync in Chromium on a GPU (BENCHMARKS.md, round trip); token loops read small tensors
/// (logits, router scores) every step. They are not in `deviceBytes`, so the pool stays small.
const STAGING_POOL_BYTES: u64 = 256 * 1024;

fn size_of_pooled(free: &[wgpu::Buffer]) -> u64 {
    free.iter().map(|b| b.size()).sum()
}

/// A read whose copy is submitted, waiting for its staging buffer to map.
pub(super) struct PendingRead {
    staging: wgpu::Buffer,
    mapped: oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    /// The verdict of the staging buffer's out-of-memory scope.
    out_of_memory: Pin<Box<dyn Future<Output = Option<String>>>>,
}

/// A read issued at once, or queued behind deferred work.
pub(super) enum Issued {
    Now(PendingRead),
    Deferred(oneshot::Receiver<Result<PendingRead>>),
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
