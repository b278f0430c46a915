//! The CPU backend's `MLTensor`: a descriptor, its flags and a buffer in wasm memory.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::backend::cpu::buffer::Buffer;
use crate::backend::cpu::context::CpuContext;
use crate::backend::{check_byte_length, TensorDescriptor};
use crate::error::{Error, Result};
use crate::memory::{HostBytes, SharedConstant};
use crate::operand::OperandDescriptor;

struct TensorInner {
    id: u64,
    context: CpuContext,
    descriptor: TensorDescriptor,
    /// A constant tensor's bytes, shared with the graphs built from it.
    constant: Option<Rc<SharedConstant>>,
    /// The bytes of a non-constant tensor: shared with a dispatch while it reads them (a write
    /// then copies).
    buffer: RefCell<Option<Rc<Buffer>>>,
    destroyed: Cell<bool>,
}

/// A handle to a CPU tensor; clones share it.
#[derive(Clone)]
pub struct CpuTensor {
    inner: Rc<TensorInner>,
}

impl CpuTensor {
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn context(&self) -> &CpuContext {
        &self.inner.context
    }

    pub fn descriptor(&self) -> &OperandDescriptor {
        &self.inner.descriptor.operand
    }

    pub fn readable(&self) -> bool {
        self.inner.descriptor.readable
    }

    pub fn writable(&self) -> bool {
        self.inner.descriptor.writable
    }

    pub fn is_constant(&self) -> bool {
        self.inner.constant.is_some()
    }

    pub fn is_destroyed(&self) -> bool {
        self.inner.destroyed.get() || self.inner.context.is_lost()
    }

    /// The bytes, or `None` once destroyed.
    pub(crate) fn buffer(&self) -> Option<Rc<Buffer>> {
        if self.is_destroyed() {
            return None;
        }
        self.inner.buffer.borrow().clone()
    }

    /// Replaces the bytes with a dispatch's result.
    pub(crate) fn set_buffer(&self, buffer: Rc<Buffer>) {
        if !self.is_destroyed() {
            *self.inner.buffer.borrow_mut() = Some(buffer);
        }
    }

    /// `destroy()`: idempotent; the memory goes at once.
    pub fn destroy(&self) {
        self.inner.destroyed.set(true);
        self.inner.buffer.borrow_mut().take();
        if let Some(constant) = &self.inner.constant {
            self.inner.context.unload(constant);
        }
    }
}

impl CpuContext {
    fn check_tensor(&self, tensor: &CpuTensor) -> Result<()> {
        if !tensor.context().same(self) {
            return Err(Error::Type("the MLTensor belongs to another MLContext".into()));
        }
        if tensor.is_destroyed() {
            return Err(Error::Type("the MLTensor is destroyed".into()));
        }
        Ok(())
    }

    fn new_tensor(&self, descriptor: TensorDescriptor, constant: Option<Rc<SharedConstant>>, buffer: Option<Rc<Buffer>>) -> CpuTensor {
        CpuTensor {
            inner: Rc::new(TensorInner {
                id: self.next_id(),
                context: self.clone(),
                descriptor,
                constant,
                buffer: RefCell::new(buffer),
                destroyed: Cell::new(false),
            }),
        }
    }

    /// `createTensor(descriptor)`: zero-filled.
    pub fn create_tensor(&self, descriptor: TensorDescriptor) -> Result<CpuTensor> {
        self.check_not_lost()?;
        descriptor.operand.check_dimensions()?;
        self.check_tensor_byte_length(&descriptor.operand)?;
        let len = descriptor.operand.byte_length() as usize;
        self.make_room(0, len.div_ceil(4) as u64 * 4)?;
        let buffer = Buffer::zeroed(len, self.device_counter())?;
        Ok(self.new_tensor(descriptor, None, Some(Rc::new(buffer))))
    }

    /// `createConstantTensor` from a host copy the caller made (JS-owned on the web). The bytes
    /// enter the backend's memory with the first graph that uses them and leave with the last
    /// one (under a budget, a constant tensor pins nothing).
    pub fn create_constant_tensor(&self, operand: OperandDescriptor, host: HostBytes) -> Result<CpuTensor> {
        self.check_not_lost()?;
        operand.check_dimensions()?;
        self.check_tensor_byte_length(&operand)?;
        check_byte_length(&operand, host.len() as usize)?;
        let constant = Rc::new(SharedConstant::new(host.len().div_ceil(4) * 4, host));
        let descriptor = TensorDescriptor { operand, readable: false, writable: false };
        Ok(self.new_tensor(descriptor, Some(constant), None))
    }

    /// A constant tensor of a file (see [`loader`](crate::backend::cpu::loader)), whose bytes
    /// [`preload`](CpuContext::preload) read.
    pub(crate) fn create_file_constant_tensor(&self, operand: OperandDescriptor, constant: Rc<SharedConstant>) -> Result<CpuTensor> {
        self.check_not_lost()?;
        let descriptor = TensorDescriptor { operand, readable: false, writable: false };
        Ok(self.new_tensor(descriptor, Some(constant), None))
    }

    /// `writeTensor(tensor, inputData)`: now, or after the deferred work issued before it.
    pub fn write_tensor(&self, tensor: &CpuTensor, bytes: &[u8]) -> Result<()> {
        self.check_tensor(tensor)?;
        if !tensor.writable() {
            return Err(Error::Type("the MLTensor was not created writable".into()));
        }
        check_byte_length(tensor.descriptor(), bytes.len())?;
        if self.is_deferring() {
            let (context, tensor, bytes) = (self.clone(), tensor.clone(), bytes.to_vec());
            self.defer(Box::pin(async move { context.write_now(&tensor, &bytes) }));
            return Ok(());
        }
        self.write_now(tensor, bytes)
    }

    fn write_now(&self, tensor: &CpuTensor, bytes: &[u8]) -> Result<()> {
        let mut slot = tensor.inner.buffer.borrow_mut();
        match slot.as_mut().map(Rc::get_mut) {
            Some(Some(buffer)) => buffer.bytes_mut().copy_from_slice(bytes),
            // A graph output still shares the bytes: the write gets its own buffer.
            Some(None) => *slot = Some(Rc::new(Buffer::from_bytes(bytes, self.device_counter())?)),
            None => {}
        }
        Ok(())
    }

    /// The synchronous checks of `readTensor(tensor)`.
    pub fn check_read(&self, tensor: &CpuTensor, expected_len: Option<usize>) -> Result<()> {
        self.check_tensor(tensor)?;
        if !tensor.readable() {
            return Err(Error::Type("the MLTensor was not created readable".into()));
        }
        if let Some(len) = expected_len {
            check_byte_length(tensor.descriptor(), len)?;
        }
        Ok(())
    }

    /// `readTensor(tensor)`: the bytes as the work issued before this call left them. The CPU
    /// backend runs each call to completion, so they are read now, unless work waits behind a
    /// read from a file: then after it. A failure of that work is reported here.
    pub fn read_tensor(&self, tensor: &CpuTensor) -> impl std::future::Future<Output = Result<Vec<u8>>> + 'static {
        let checked = self.check_read(tensor, None);
        let waiting = match checked {
            Ok(()) if self.is_deferring() => {
                let (sender, receiver) = crate::backend::oneshot::channel();
                let (context, tensor) = (self.clone(), tensor.clone());
                self.defer(Box::pin(async move {
                    sender.send(context.read_now(&tensor));
                    Ok(())
                }));
                Some(receiver)
            }
            _ => None,
        };
        let now = match (&checked, &waiting) {
            (Ok(()), None) => Some(self.read_now(tensor)),
            _ => None,
        };
        async move {
            checked?;
            match (now, waiting) {
                (Some(result), _) => result,
                (None, Some(receiver)) => receiver.await,
                (None, None) => Err(Error::InvalidState("the read was not issued".into())),
            }
        }
    }

    fn read_now(&self, tensor: &CpuTensor) -> Result<Vec<u8>> {
        if let Some(error) = self.take_deferred_error() {
            return Err(error);
        }
        let buffer = tensor.buffer().ok_or_else(|| Error::InvalidState("the MLTensor is destroyed".into()))?;
        Ok(buffer.bytes().to_vec())
    }
}

impl crate::graph::ConstantTensor for CpuTensor {
    fn belongs_to(&self, context: &dyn crate::graph::BuilderContext) -> bool {
        let context: &dyn std::any::Any = context;
        context.downcast_ref::<CpuContext>().is_some_and(|c| c.same(self.context()))
    }

    fn descriptor(&self) -> &OperandDescriptor {
        CpuTensor::descriptor(self)
    }

    fn is_constant(&self) -> bool {
        CpuTensor::is_constant(self)
    }

    fn is_destroyed(&self) -> bool {
        CpuTensor::is_destroyed(self)
    }

    fn shared_constant(&self) -> Option<Rc<SharedConstant>> {
        if self.is_destroyed() {
            return None;
        }
        self.inner.constant.clone()
    }
}
