//! `MLTensor`'s core: a descriptor, its flags and the device buffer holding its bytes.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::graph::OperandDescriptor;
use crate::runtime::buffer::DeviceBuffer;
use crate::runtime::context::Context;

/// `MLTensorDescriptor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDescriptor {
    pub operand: OperandDescriptor,
    pub readable: bool,
    pub writable: bool,
}

struct TensorInner {
    id: u64,
    context: Context,
    descriptor: TensorDescriptor,
    constant: bool,
    buffer: RefCell<Option<Rc<DeviceBuffer>>>,
    destroyed: Cell<bool>,
}

/// A handle to a tensor; clones share it.
#[derive(Clone)]
pub struct Tensor {
    inner: Rc<TensorInner>,
}

impl Tensor {
    pub(crate) fn new(context: &Context, descriptor: TensorDescriptor, constant: bool, buffer: DeviceBuffer) -> Tensor {
        Tensor {
            inner: Rc::new(TensorInner {
                id: context.next_tensor_id(),
                context: context.clone(),
                descriptor,
                constant,
                buffer: RefCell::new(Some(Rc::new(buffer))),
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

    /// The device buffer, or `None` once destroyed. Graphs that use a constant tensor hold their
    /// own reference, so the buffer outlives `destroy()` while they need it.
    pub fn buffer(&self) -> Option<Rc<DeviceBuffer>> {
        if self.is_destroyed() {
            return None;
        }
        self.inner.buffer.borrow().clone()
    }

    /// `destroy()`: idempotent; pending reads then fail with `InvalidStateError`.
    pub fn destroy(&self) {
        self.inner.destroyed.set(true);
        self.inner.buffer.borrow_mut().take();
    }
}
