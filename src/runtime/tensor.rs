//! `MLTensor`'s core: a descriptor, its flags and the device memory holding its bytes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::graph::OperandDescriptor;
use crate::memory::SharedConstant;
use crate::runtime::buffer::DeviceBuffer;
use crate::runtime::context::Context;

/// `MLTensorDescriptor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDescriptor {
    pub operand: OperandDescriptor,
    pub readable: bool,
    pub writable: bool,
}

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
