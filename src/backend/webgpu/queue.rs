//! The context's queue: copies and passes recorded ahead of the next submission, and work
//! deferred behind a stream from a weight file, run in call order.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::memory::buffer::DeviceBuffer;
use crate::backend::webgpu::context::Context;
use crate::backend::oneshot;
use crate::weights::LocalFuture;

/// A compute pass queued by the weight loader (float16 widened on the GPU from a staging
/// buffer): the next submission, whichever it is (a dispatch, a read, the loader's own marker),
/// records it first, so a swap-in adds no submission of its own.
pub(crate) struct PendingPass {
    pub pipeline: Rc<crate::backend::webgpu::pipeline::Pipeline>,
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
    /// (their file reads share the context's lanes, see `runtime::lanes`), as nothing else can
    /// use those buffers before all of them are done.
    Stream(LocalFuture<'static, Result<()>>),
}

/// Work deferred behind a re-stream: a dispatch of a graph whose constants come back from the
/// `"disk"` tier is recorded once they are streamed, and the writes and dispatches after it
/// wait in the same order; reads wait until it is all done.
#[derive(Default)]
pub(super) struct Deferred {
    pub(super) ops: RefCell<VecDeque<DeferredOp>>,
    pub(super) busy: Cell<bool>,
    pub(super) idle: RefCell<Vec<oneshot::Sender<()>>>,
    /// The first failure of deferred work, reported by the next `readTensor`.
    pub(super) error: RefCell<Option<Error>>,
}

impl Context {
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

    pub(super) fn has_pending_work(&self) -> bool {
        !self.inner.pending_passes.borrow().is_empty() || !self.inner.pending_copies.borrow().is_empty()
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
            oneshot::spawn(drive(self.clone()));
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
        self.defer(DeferredOp::Stream(Box::pin(async move {
            constant.stream(&mut *progress).await.map(|_| ())
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
}

/// A count of things in progress, and what waits for none to be left.
#[derive(Default)]
pub(super) struct BusyCount {
    count: Cell<u32>,
    idle: RefCell<Vec<oneshot::Sender<()>>>,
}

impl BusyCount {
    pub(super) fn enter(&self) {
        self.count.set(self.count.get() + 1);
    }

    pub(super) fn leave(&self) {
        self.count.set(self.count.get().saturating_sub(1));
        if self.count.get() == 0 {
            let waiting = std::mem::take(&mut *self.idle.borrow_mut());
            waiting.into_iter().for_each(|w| w.send(()));
        }
    }

    pub(super) fn busy(&self) -> bool {
        self.count.get() > 0
    }

    pub(super) async fn idle(&self) {
        while self.busy() {
            let (sender, receiver) = oneshot::channel();
            self.idle.borrow_mut().push(sender);
            receiver.await;
        }
    }
}

/// See [`Context::queuing_stream`]; dropped before the stream is queued or on failure.
pub struct QueuingStream(Context);

impl Drop for QueuingStream {
    fn drop(&mut self) {
        self.0.inner.queuing_streams.leave();
    }
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
