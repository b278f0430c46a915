//! Device buffers with exact accounting: every GPU buffer the runtime holds is a [`DeviceBuffer`],
//! registered on creation and unregistered when dropped, so the registry's byte count is the
//! device memory the runtime holds at that moment.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Counts the live device buffers of one context.
#[derive(Default, Debug)]
pub struct BufferRegistry {
    live_bytes: Cell<u64>,
    live_buffers: Cell<u64>,
    peak_bytes: Cell<u64>,
    next_id: Cell<u64>,
    /// While passes wait for the next submission (the context's pending passes), buffers
    /// dropped meanwhile are kept here instead of destroyed, since a pending pass may bind one
    /// and a destroyed buffer would invalidate that whole submission.
    deferred: RefCell<Option<Vec<wgpu::Buffer>>>,
    /// During one swap-in (see [`begin_recycling`](Self::begin_recycling)), the buffers of the
    /// constants it evicted, handed to the constants it loads instead of destroyed and created.
    recycled: RefCell<Option<Vec<DeviceBuffer>>>,
}

impl BufferRegistry {
    /// Bytes of all live device buffers.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.get()
    }

    pub fn live_buffers(&self) -> u64 {
        self.live_buffers.get()
    }

    /// The largest `live_bytes` seen since the last [`reset_peak`](Self::reset_peak).
    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes.get()
    }

    /// The id of the last buffer created; later buffers have larger ids.
    pub fn last_id(&self) -> u64 {
        self.next_id.get()
    }

    pub fn reset_peak(&self) {
        self.peak_bytes.set(self.live_bytes.get());
    }

    fn add(&self, size: u64) -> u64 {
        self.live_bytes.set(self.live_bytes.get() + size);
        self.live_buffers.set(self.live_buffers.get() + 1);
        self.peak_bytes.set(self.peak_bytes.get().max(self.live_bytes.get()));
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        id
    }

    /// Passes are pending: buffers dropped from now on wait for [`end_deferral`](Self::end_deferral).
    pub(crate) fn defer_destruction(&self) {
        self.deferred.borrow_mut().get_or_insert_with(Vec::new);
    }

    /// The pending passes are recorded: the buffers dropped meanwhile, which the caller drops
    /// after submitting (wgpu frees them once the GPU is done with them).
    pub(crate) fn end_deferral(&self) -> Vec<wgpu::Buffer> {
        self.deferred.borrow_mut().take().unwrap_or_default()
    }

    /// A swap-in starts: constant buffers let go of from now on are kept for
    /// [`reuse`](Self::reuse) until [`end_recycling`](Self::end_recycling). Not while passes
    /// are pending, since one may still read a released buffer before anything rewrites it
    /// (queue writes run ahead of the pending passes); work already submitted is ordered before
    /// any later write, so it can never see the new contents.
    pub(crate) fn begin_recycling(&self) {
        if self.deferred.borrow().is_none() {
            self.recycled.borrow_mut().get_or_insert_with(Vec::new);
        }
    }

    /// Destroys the recycled buffers nothing reused, so that `live_bytes` is exact again.
    pub(crate) fn end_recycling(&self) {
        let left = self.recycled.borrow_mut().take();
        drop(left);
    }

    /// Bytes held by recycled buffers: counted in `live_bytes`, but free for the swap-in.
    pub(crate) fn recycled_bytes(&self) -> u64 {
        self.recycled.borrow().as_ref().map_or(0, |r| r.iter().map(|b| b.size).sum())
    }

    /// A recycled buffer of exactly `size` bytes, if any (all runtime buffers have one usage).
    pub(crate) fn reuse(&self, size: u64) -> Option<DeviceBuffer> {
        let mut recycled = self.recycled.borrow_mut();
        let recycled = recycled.as_mut()?;
        let i = recycled.iter().position(|b| b.size == size)?;
        Some(recycled.swap_remove(i))
    }

    fn remove(&self, size: u64) {
        self.live_bytes.set(self.live_bytes.get().saturating_sub(size));
        self.live_buffers.set(self.live_buffers.get().saturating_sub(1));
    }
}

/// A GPU buffer owned by the runtime. Dropping it destroys the buffer and updates the registry.
pub struct DeviceBuffer {
    pub buffer: wgpu::Buffer,
    pub size: u64,
    /// Unique within the context; bind group caches key on it.
    pub id: u64,
    registry: Rc<BufferRegistry>,
}

impl DeviceBuffer {
    pub(crate) fn new(buffer: wgpu::Buffer, registry: &Rc<BufferRegistry>) -> DeviceBuffer {
        let size = buffer.size();
        let id = registry.add(size);
        DeviceBuffer { buffer, size, id, registry: registry.clone() }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer").field("id", &self.id).field("size", &self.size).finish()
    }
}

impl DeviceBuffer {
    /// Lets go of the buffer: kept for reuse while a swap-in recycles, else destroyed.
    pub(crate) fn recycle(self) {
        let registry = self.registry.clone();
        let mut recycled = registry.recycled.borrow_mut();
        match recycled.as_mut() {
            Some(list) => list.push(self),
            None => {
                drop(recycled);
                drop(self);
            }
        }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match self.registry.deferred.borrow_mut().as_mut() {
            Some(kept) => kept.push(self.buffer.clone()),
            None => self.buffer.destroy(),
        }
        self.registry.remove(self.size);
    }
}
