//! The `"host"` tier of constants streamed from weight files: under `hostMemoryBudget`, a
//! file-backed constant keeps a copy of its bytes in host memory the GPU can copy from
//! (`MAP_WRITE | COPY_SRC` buffers, written once when the bytes are read from the file), so a
//! graph evicted by the memory budget comes back with a GPU copy instead of a file read and a
//! CPU copy into the queue's staging memory. The CPU backend keeps [`HostBytes`] (outside wasm
//! memory on the web) and copies them back into its own memory. The copies are evicted least recently used first
//! when a new one would go over the host budget; a constant without a copy streams from its file
//! again (the `"disk"` tier).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::memory::HostBytes;

/// Where a host copy's bytes are.
enum Store {
    /// GPU-visible host memory (the WebGPU backend).
    Mapped(wgpu::Buffer),
    /// Host bytes counted in the context's host total by themselves (the CPU backend).
    Bytes(HostBytes),
}

/// A constant's bytes in host memory.
pub struct HostCopy {
    /// `None` once evicted from the host budget.
    store: RefCell<Option<Store>>,
    /// Bytes of the buffer: the constant's bytes in whole words.
    pub size: u64,
    last_used: Cell<u64>,
    cache: Weak<HostCacheState>,
}

impl HostCopy {
    /// The buffer, unless the host budget evicted it.
    pub fn buffer(&self) -> Option<wgpu::Buffer> {
        match &*self.store.borrow() {
            Some(Store::Mapped(buffer)) => Some(buffer.clone()),
            _ => None,
        }
    }

    /// Copies the bytes of a [`HostBytes`] copy into `out`; `false` when evicted or of another size.
    pub fn copy_to(&self, out: &mut [u8]) -> bool {
        match &*self.store.borrow() {
            Some(Store::Bytes(bytes)) => bytes.copy_to(out),
            _ => false,
        }
    }

    pub fn is_live(&self) -> bool {
        self.store.borrow().is_some()
    }

    /// Marks the copy used now, for the least-recently-used order.
    pub fn touch(&self, now: u64) {
        self.last_used.set(now);
    }

    /// Lets go of the bytes and their count in the host total.
    pub fn evict(&self) {
        let Some(store) = self.store.borrow_mut().take() else { return };
        let mapped = matches!(store, Store::Mapped(_));
        // Queued copies hold their own reference to a buffer: wgpu frees it after them. Host
        // bytes leave the host total as they drop.
        drop(store);
        if let Some(cache) = self.cache.upgrade() {
            cache.bytes.set(cache.bytes.get().saturating_sub(self.size));
            if mapped {
                cache.host_bytes.set(cache.host_bytes.get().saturating_sub(self.size));
            }
        }
    }
}

impl Drop for HostCopy {
    fn drop(&mut self) {
        self.evict();
    }
}

/// A file-backed constant's host copy, while the host budget keeps it (both backends' loaders).
#[derive(Default)]
pub struct HostCopySlot(RefCell<Option<Rc<HostCopy>>>);

impl HostCopySlot {
    /// The copy, unless there is none or the host budget evicted it.
    pub fn live(&self) -> Option<Rc<HostCopy>> {
        self.0.borrow().as_ref().filter(|c| c.is_live()).cloned()
    }

    pub fn set(&self, copy: Rc<HostCopy>) {
        *self.0.borrow_mut() = Some(copy);
    }

    /// Its bytes, if live.
    pub fn bytes(&self) -> Option<u64> {
        self.live().map(|c| c.size)
    }

    /// Lets go of the copy (`swapOut({to: "disk"})`).
    pub fn clear(&self) {
        if let Some(copy) = self.0.borrow_mut().take() {
            copy.evict();
        }
    }
}

/// The context's host copies of file-backed constants and their budget.
pub struct HostCacheState {
    budget: Cell<Option<u64>>,
    bytes: Cell<u64>,
    /// The context's host byte total (`memoryInfo().hostBytes`), which copies count in.
    host_bytes: Rc<Cell<u64>>,
    copies: RefCell<Vec<Weak<HostCopy>>>,
}

/// A handle to the context's host cache.
#[derive(Clone)]
pub struct HostCache(Rc<HostCacheState>);

impl HostCache {
    pub fn new(budget: Option<u64>, host_bytes: Rc<Cell<u64>>) -> HostCache {
        HostCache(Rc::new(HostCacheState {
            budget: Cell::new(budget),
            bytes: Cell::new(0),
            host_bytes,
            copies: RefCell::new(Vec::new()),
        }))
    }

    /// Bytes of live host copies.
    pub fn bytes(&self) -> u64 {
        self.0.bytes.get()
    }

    /// Whether a copy of `size` bytes can be kept, evicting least recently used copies for room.
    pub fn make_room(&self, size: u64) -> bool {
        let Some(budget) = self.0.budget.get() else { return false };
        if size > budget {
            return false;
        }
        while self.0.bytes.get() + size > budget {
            let oldest = {
                let mut copies = self.0.copies.borrow_mut();
                copies.retain(|c| c.upgrade().is_some_and(|c| c.is_live()));
                copies.iter().filter_map(Weak::upgrade).min_by_key(|c| c.last_used.get())
            };
            match oldest {
                Some(copy) => copy.evict(),
                None => return false,
            }
        }
        true
    }

    /// Registers a copy just written into `buffer` (unmapped), counted in the budget.
    pub fn keep(&self, buffer: wgpu::Buffer, size: u64, now: u64) -> Rc<HostCopy> {
        self.0.host_bytes.set(self.0.host_bytes.get() + size);
        self.register(Store::Mapped(buffer), size, now)
    }

    /// Registers a copy in `bytes` (already counted in the host total), counted in the budget.
    pub fn keep_bytes(&self, bytes: HostBytes, now: u64) -> Rc<HostCopy> {
        let size = bytes.len();
        self.register(Store::Bytes(bytes), size, now)
    }

    fn register(&self, store: Store, size: u64, now: u64) -> Rc<HostCopy> {
        let state = &self.0;
        state.bytes.set(state.bytes.get() + size);
        let copy = Rc::new(HostCopy {
            store: RefCell::new(Some(store)),
            size,
            last_used: Cell::new(now),
            cache: Rc::downgrade(state),
        });
        state.copies.borrow_mut().push(Rc::downgrade(&copy));
        copy
    }
}
