//! The CPU backend's `MLContext`: its memory accounting (buffers in wasm memory are its
//! "device" bytes), the budget, the resident copies of shared constants, and destruction.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use crate::backend::cpu::buffer::Buffer;
use crate::backend::oneshot::Signal;
use crate::backend::ContextOptions;
use crate::error::{Error, Result};
use crate::memory::{MemoryInfo, MemoryState, SharedConstant};
use crate::operand::OperandDescriptor;

/// The largest tensor the CPU backend takes: wasm32 memory is at most 4 GiB, and one buffer of
/// half of it would leave little for anything else.
const MAX_TENSOR_BYTE_LENGTH: u64 = 1 << 30;

/// A handle to a CPU context; clones share it.
#[derive(Clone)]
pub struct CpuContext {
    pub(crate) inner: Rc<CpuInner>,
}

pub(crate) struct CpuInner {
    options: ContextOptions,
    pub(crate) memory: MemoryState,
    /// Bytes of live [`Buffer`]s: tensors, resident constants and intermediates in flight.
    pub(crate) device_bytes: Rc<Cell<u64>>,
    lost: Signal,
    next_id: Cell<u64>,
    /// Resident copies of shared constants by the constant's address: graphs and constant
    /// tensors that share a constant share one buffer, freed when the last of them lets go.
    resident: RefCell<HashMap<usize, Weak<Buffer>>>,
}

impl CpuContext {
    pub fn new(options: ContextOptions) -> CpuContext {
        let memory = MemoryState::new(options.memory_budget, options.host_memory_budget);
        CpuContext {
            inner: Rc::new(CpuInner {
                options,
                memory,
                device_bytes: Rc::default(),
                lost: Signal::default(),
                next_id: Cell::new(1),
                resident: RefCell::default(),
            }),
        }
    }

    pub fn options(&self) -> &ContextOptions {
        &self.inner.options
    }

    pub fn same(&self, other: &CpuContext) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }

    /// Ids of tensors and graphs, unique within the context.
    pub(crate) fn next_id(&self) -> u64 {
        let id = self.inner.next_id.get();
        self.inner.next_id.set(id + 1);
        id
    }

    pub fn is_lost(&self) -> bool {
        self.inner.lost.get().is_some()
    }

    pub fn lost_message(&self) -> Option<String> {
        self.inner.lost.get()
    }

    /// Resolves with the loss message once the context is destroyed (`MLContext.lost`).
    pub fn lost(&self) -> impl std::future::Future<Output = String> {
        self.inner.lost.wait()
    }

    /// `destroy()`: its graphs and tensors stop working and their memory is released as their
    /// handles go.
    pub fn destroy(&self) {
        if !self.is_lost() {
            self.inner.lost.set("the MLContext was destroyed with destroy()".into());
        }
    }

    pub(crate) fn check_not_lost(&self) -> Result<()> {
        match self.inner.lost.get() {
            Some(message) => Err(Error::InvalidState(message)),
            None => Ok(()),
        }
    }

    pub fn max_tensor_byte_length(&self) -> u64 {
        MAX_TENSOR_BYTE_LENGTH
    }

    pub fn check_tensor_byte_length(&self, descriptor: &OperandDescriptor) -> Result<()> {
        descriptor.check_byte_length_limit(MAX_TENSOR_BYTE_LENGTH)
    }

    pub fn host_byte_counter(&self) -> &Rc<Cell<u64>> {
        &self.inner.memory.host_bytes
    }

    pub(crate) fn device_counter(&self) -> &Rc<Cell<u64>> {
        &self.inner.device_bytes
    }

    /// `memoryInfo()`: device bytes are the backend's live buffers in wasm memory.
    pub fn memory_info(&self) -> MemoryInfo {
        let m = &self.inner.memory;
        MemoryInfo {
            device_bytes: self.inner.device_bytes.get(),
            host_bytes: m.host_bytes.get(),
            budget_bytes: m.budget.get(),
            swap_ins: m.swap_ins.get(),
            swap_outs: m.swap_outs.get(),
            bytes_uploaded: m.bytes_uploaded.get(),
            bytes_streamed_from_disk: m.bytes_streamed_from_disk.get(),
        }
    }

    /// Evicts least recently used graphs (other than graph `except`) until `needed` more bytes
    /// fit the budget; `QuotaExceededError` when they cannot.
    pub(crate) fn make_room(&self, except: u64, needed: u64) -> Result<()> {
        let memory = &self.inner.memory;
        let Some(budget) = memory.budget.get() else { return Ok(()) };
        loop {
            let live = self.inner.device_bytes.get();
            if live + needed <= budget {
                return Ok(());
            }
            let Some(victim) = memory.eviction_order(except).into_iter().next() else {
                return Err(Error::QuotaExceeded(format!(
                    "{needed} more bytes are needed but the memory budget is {budget} bytes and {live} bytes are held by tensors and resident graphs that cannot be evicted"
                )));
            };
            victim.evict();
        }
    }

    /// The resident copy of `constant`, shared with every graph and tensor holding it; copied
    /// from its host copy when none is resident. Returns the buffer and the bytes copied.
    pub(crate) fn resident_constant(&self, constant: &Rc<SharedConstant>) -> Result<(Rc<Buffer>, u64)> {
        let key = Rc::as_ptr(constant) as usize;
        if let Some(buffer) = self.inner.resident.borrow().get(&key).and_then(Weak::upgrade) {
            return Ok((buffer, 0));
        }
        let bytes = constant
            .host_copy()
            .ok_or_else(|| Error::NotSupported("a constant without a host copy cannot be used by the CPU backend".into()))?;
        let buffer = Rc::new(Buffer::from_bytes(&bytes, &self.inner.device_bytes)?);
        let mut resident = self.inner.resident.borrow_mut();
        resident.retain(|_, b| b.strong_count() > 0);
        resident.insert(key, Rc::downgrade(&buffer));
        Ok((buffer, bytes.len() as u64))
    }

    /// Bytes [`resident_constant`](Self::resident_constant) would copy for `constant`.
    pub(crate) fn bytes_to_acquire(&self, constant: &Rc<SharedConstant>) -> u64 {
        let key = Rc::as_ptr(constant) as usize;
        match self.inner.resident.borrow().get(&key).and_then(Weak::upgrade) {
            Some(_) => 0,
            None => constant.buffer_size,
        }
    }
}

impl crate::graph::BuilderContext for CpuContext {
    fn is_lost(&self) -> bool {
        CpuContext::is_lost(self)
    }

    fn check_tensor_byte_length(&self, descriptor: &OperandDescriptor) -> Result<()> {
        CpuContext::check_tensor_byte_length(self, descriptor)
    }

    fn host_byte_counter(&self) -> &Rc<Cell<u64>> {
        CpuContext::host_byte_counter(self)
    }
}
