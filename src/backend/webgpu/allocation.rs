//! Device allocation: buffers created inside out-of-memory error scopes, the GPU's verdict
//! awaited before anything binds them, least recently used graphs evicted to make room (for the
//! memory budget, and when the GPU itself is out of memory), and test-only fault injection.

use std::future::Future;
use std::pin::Pin;

use crate::error::{Error, Result};
use crate::memory::buffer::DeviceBuffer;
use crate::memory::{Allocator, BufferRegistry};
use crate::backend::webgpu::context::Context;

impl Context {
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
            memory.pool.trim(&memory.slot_needs_with(except));
        }
    }

    /// Evicts the least recently used resident graph other than graph `except`, for an
    /// allocation the GPU could not satisfy; `false` when no graph is left to evict.
    pub(super) fn evict_one(&self, except: u64) -> bool {
        let memory = &self.inner.memory;
        let Some(victim) = memory.eviction_order(except).into_iter().next() else { return false };
        victim.evict();
        memory.pool.trim(&memory.slot_needs_with(except));
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

impl Allocator for Context {
    fn buffers(&self) -> &BufferRegistry {
        Context::buffers(self)
    }

    fn create_buffer_unchecked(&self, size: u64, label: &str) -> DeviceBuffer {
        Context::create_buffer_unchecked(self, size, label)
    }

    fn queue(&self) -> &wgpu::Queue {
        Context::queue(self)
    }
}
