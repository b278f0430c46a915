//! `MLTensor`'s core: a descriptor, its flags and the device memory holding its bytes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::graph::OperandDescriptor;
use crate::backend::{check_byte_length, TensorDescriptor};
use crate::memory::{HostBytes, SharedConstant};
use crate::ops::wgsl::buffer_size;
use crate::backend::webgpu::queue::DeferredOp;
use crate::memory::buffer::DeviceBuffer;
use crate::backend::webgpu::context::Context;

/// A tensor's bytes: its own buffer, or for a constant tensor a constant graphs share.
#[derive(Clone)]
enum Storage {
    Buffer(Rc<DeviceBuffer>),
    Constant(Rc<SharedConstant>),
}

struct TensorInner {
    id: u64,
    context: Context,
    descriptor: TensorDescriptor,
    constant: bool,
    storage: RefCell<Option<Storage>>,
    destroyed: Cell<bool>,
}

/// A handle to a tensor; clones share it.
#[derive(Clone)]
pub struct Tensor {
    inner: Rc<TensorInner>,
}

impl Tensor {
    pub(crate) fn new(context: &Context, descriptor: TensorDescriptor, buffer: DeviceBuffer) -> Tensor {
        Tensor::with_storage(context, descriptor, false, Storage::Buffer(Rc::new(buffer)))
    }

    pub(crate) fn new_constant(context: &Context, descriptor: TensorDescriptor, constant: Rc<SharedConstant>) -> Tensor {
        Tensor::with_storage(context, descriptor, true, Storage::Constant(constant))
    }

    fn with_storage(context: &Context, descriptor: TensorDescriptor, constant: bool, storage: Storage) -> Tensor {
        Tensor {
            inner: Rc::new(TensorInner {
                id: context.next_tensor_id(),
                context: context.clone(),
                descriptor,
                constant,
                storage: RefCell::new(Some(storage)),
                destroyed: Cell::new(false),
            }),
        }
    }

    /// Unique within the context.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn context(&self) -> &Context {
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
        self.inner.constant
    }

    pub fn is_destroyed(&self) -> bool {
        self.inner.destroyed.get() || self.inner.context.is_lost()
    }

    /// The device buffer of a non-constant tensor, or `None` once destroyed.
    pub fn buffer(&self) -> Option<Rc<DeviceBuffer>> {
        if self.is_destroyed() {
            return None;
        }
        match &*self.inner.storage.borrow() {
            Some(Storage::Buffer(b)) => Some(b.clone()),
            Some(Storage::Constant(c)) => c.device(),
            None => None,
        }
    }

    /// The shared constant of a constant tensor, or `None` once destroyed. Graphs built from it
    /// hold their own reference, so its bytes outlive `destroy()` while they need them.
    pub fn shared_constant(&self) -> Option<Rc<SharedConstant>> {
        if self.is_destroyed() {
            return None;
        }
        match &*self.inner.storage.borrow() {
            Some(Storage::Constant(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// `destroy()`: idempotent; pending reads then fail with `InvalidStateError`.
    pub fn destroy(&self) {
        self.inner.destroyed.set(true);
        self.inner.storage.borrow_mut().take();
    }
}

impl Context {
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

    pub(super) fn check_tensor(&self, tensor: &Tensor) -> Result<()> {
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
}

impl crate::graph::ConstantTensor for Tensor {
    fn belongs_to(&self, context: &dyn crate::graph::BuilderContext) -> bool {
        let context: &dyn std::any::Any = context;
        context.downcast_ref::<Context>().is_some_and(|c| c.same(self.context()))
    }

    fn descriptor(&self) -> &OperandDescriptor {
        Tensor::descriptor(self)
    }

    fn is_constant(&self) -> bool {
        Tensor::is_constant(self)
    }

    fn is_destroyed(&self) -> bool {
        Tensor::is_destroyed(self)
    }

    fn shared_constant(&self) -> Option<Rc<SharedConstant>> {
        Tensor::shared_constant(self)
    }
}
