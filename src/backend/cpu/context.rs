//! The CPU backend's `MLContext`: its memory accounting (buffers in wasm memory are its
//! "device" bytes), the budget, the resident copies of shared constants, the work that waits
//! behind a read from a file, and destruction.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::{Rc, Weak};

use crate::backend::cpu::buffer::Buffer;
use crate::backend::oneshot::{self, Signal};
use crate::backend::ContextOptions;
use crate::error::{Error, Result};
use crate::memory::read_ahead::Windows;
use crate::memory::{MemoryInfo, MemoryState, SharedConstant};
use crate::operand::OperandDescriptor;
use crate::weights::LocalFuture;

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
    /// Copies of file-backed constants read by `constantTensor()` that no resident graph holds
    /// yet: the first graph made resident with one takes it over. They go when their tensor is
    /// destroyed, or before a budget error when nothing else can be evicted.
    loaded: RefCell<Vec<(Weak<SharedConstant>, Rc<Buffer>)>>,
    /// Constants of graphs loaded from the graph cache, by key (shared between them).
    pub(crate) saved_constants: RefCell<HashMap<String, Weak<SharedConstant>>>,
    /// Work waiting behind a read from a file, run in call order.
    deferred: Deferred,
}

/// Dispatches of graphs whose constants come back from the `"disk"` tier run once they are
/// read; the writes, dispatches and reads issued after one wait behind it, in order.
#[derive(Default)]
struct Deferred {
    ops: RefCell<VecDeque<LocalFuture<'static, Result<()>>>>,
    busy: Cell<bool>,
    idle: RefCell<Vec<oneshot::Sender<()>>>,
    /// The first failure of deferred work, reported by the next `readTensor()`.
    error: RefCell<Option<Error>>,
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
                loaded: RefCell::default(),
                saved_constants: RefCell::default(),
                deferred: Deferred::default(),
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
    /// fit the budget, then constants loaded for tensors no graph uses yet; `QuotaExceededError`
    /// when they cannot.
    pub(crate) fn make_room(&self, except: u64, needed: u64) -> Result<()> {
        let memory = &self.inner.memory;
        let Some(budget) = memory.budget.get() else { return Ok(()) };
        loop {
            let live = self.inner.device_bytes.get();
            if live + needed <= budget {
                return Ok(());
            }
            if let Some(victim) = memory.eviction_order(except).into_iter().next() {
                victim.evict();
                continue;
            }
            let mut loaded = self.inner.loaded.borrow_mut();
            if !loaded.is_empty() {
                loaded.remove(0);
                continue;
            }
            drop(loaded);
            return Err(Error::QuotaExceeded(format!(
                "{needed} more bytes are needed but the memory budget is {budget} bytes and {live} bytes are held by tensors and resident graphs that cannot be evicted"
            )));
        }
    }

    fn held(&self, constant: &Rc<SharedConstant>) -> Option<Rc<Buffer>> {
        let key = Rc::as_ptr(constant) as usize;
        self.inner.resident.borrow().get(&key).and_then(Weak::upgrade)
    }

    /// Whether the constant's bytes are in the backend's memory.
    pub(crate) fn holds(&self, constant: &Rc<SharedConstant>) -> bool {
        self.held(constant).is_some() || self.inner.loaded.borrow().iter().any(|(c, _)| c.as_ptr() == Rc::as_ptr(constant))
    }

    fn remember(&self, constant: &Rc<SharedConstant>, buffer: &Rc<Buffer>) {
        let mut resident = self.inner.resident.borrow_mut();
        resident.retain(|_, b| b.strong_count() > 0);
        resident.insert(Rc::as_ptr(constant) as usize, Rc::downgrade(buffer));
    }

    /// The resident copy of `constant`, shared with every graph and tensor holding it; copied
    /// from its host copy, or read from its file, when none is resident. Returns the buffer and
    /// the bytes copied into it. `ahead` holds bytes read ahead from files.
    pub(crate) async fn resident_constant(&self, constant: &Rc<SharedConstant>, ahead: &Windows) -> Result<(Rc<Buffer>, u64)> {
        let taken = {
            let mut loaded = self.inner.loaded.borrow_mut();
            let found = loaded.iter().position(|(c, _)| c.as_ptr() == Rc::as_ptr(constant));
            found.map(|i| loaded.remove(i).1)
        };
        if let Some(buffer) = taken.or_else(|| self.held(constant)) {
            return Ok((buffer, 0));
        }
        let buffer = match (constant.host(), constant.reread()) {
            (Some(host), _) => {
                let mut buffer = Buffer::zeroed(host.len() as usize, &self.inner.device_bytes)?;
                if !host.copy_to(buffer.bytes_mut()) {
                    return Err(Error::Unknown("a constant's host copy changed size".into()));
                }
                buffer
            }
            (None, Some(file)) => {
                let mut buffer = Buffer::zeroed(file.byte_length() as usize, &self.inner.device_bytes)?;
                file.reread(buffer.bytes_mut(), ahead).await?;
                buffer
            }
            (None, None) => return Err(Error::NotSupported("a constant of another backend cannot be used by the CPU backend".into())),
        };
        // Another graph may have made it resident while this one read it.
        if let Some(buffer) = self.held(constant) {
            return Ok((buffer, 0));
        }
        let bytes = buffer.len() as u64;
        let buffer = Rc::new(buffer);
        self.remember(constant, &buffer);
        Ok((buffer, bytes))
    }

    /// Bytes [`resident_constant`](Self::resident_constant) would copy for `constant`.
    pub(crate) fn bytes_to_acquire(&self, constant: &Rc<SharedConstant>) -> u64 {
        if self.holds(constant) {
            0
        } else {
            constant.buffer_size
        }
    }

    /// Reads a file-backed constant into the backend's memory for `constantTensor()`, until a
    /// graph takes it over.
    pub(crate) async fn preload(&self, constant: &Rc<SharedConstant>) -> Result<()> {
        self.make_room(0, constant.buffer_size)?;
        let (buffer, _) = self.resident_constant(constant, &Windows::default()).await?;
        let mut loaded = self.inner.loaded.borrow_mut();
        loaded.retain(|(c, _)| c.strong_count() > 0);
        loaded.push((Rc::downgrade(constant), buffer));
        Ok(())
    }

    /// Lets go of a constant tensor's copy that no graph took over.
    pub(crate) fn unload(&self, constant: &Rc<SharedConstant>) {
        self.inner.loaded.borrow_mut().retain(|(c, _)| c.strong_count() > 0 && c.as_ptr() != Rc::as_ptr(constant));
    }

    /// Whether work waits behind a read from a file.
    pub(crate) fn is_deferring(&self) -> bool {
        self.inner.deferred.busy.get()
    }

    /// Queues `op` behind the deferred work, starting it if idle.
    pub(crate) fn defer(&self, op: LocalFuture<'static, Result<()>>) {
        let deferred = &self.inner.deferred;
        deferred.ops.borrow_mut().push_back(op);
        if !deferred.busy.replace(true) {
            oneshot::spawn(drive(self.clone()));
        }
    }

    /// Resolves once no work is deferred.
    pub(crate) async fn settled(&self) {
        if self.is_deferring() {
            let (sender, receiver) = oneshot::channel();
            self.inner.deferred.idle.borrow_mut().push(sender);
            receiver.await;
        }
    }

    /// The first failure of deferred work since the last read, if any.
    pub(crate) fn take_deferred_error(&self) -> Option<Error> {
        self.inner.deferred.error.borrow_mut().take()
    }
}

/// Runs the deferred work in order until none is left, then wakes what waits for it.
async fn drive(context: CpuContext) {
    let deferred = &context.inner.deferred;
    loop {
        let op = deferred.ops.borrow_mut().pop_front();
        let Some(op) = op else { break };
        if let Err(e) = op.await {
            deferred.error.borrow_mut().get_or_insert(e);
        }
    }
    deferred.busy.set(false);
    let waiting = std::mem::take(&mut *deferred.idle.borrow_mut());
    waiting.into_iter().for_each(|w| w.send(()));
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
