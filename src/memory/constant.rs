//! A constant's bytes and where they live. Graphs (and a constant `MLTensor`) share one
//! [`SharedConstant`]; it stays on the GPU while any graph using it is resident, and its host
//! copy makes every swap-in an upload, never a recompile.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::Result;
use crate::memory::HostBytes;
use crate::runtime::{Context, DeviceBuffer};

pub struct SharedConstant {
    /// Size of the GPU buffer (the byte length rounded up to whole words).
    pub buffer_size: u64,
    host: HostBytes,
    device: RefCell<Option<Rc<DeviceBuffer>>>,
    resident_users: Cell<u32>,
}

impl SharedConstant {
    pub fn new(buffer_size: u64, host: HostBytes) -> SharedConstant {
        SharedConstant { buffer_size, host, device: RefCell::new(None), resident_users: Cell::new(0) }
    }

    /// The device buffer, if resident.
    pub fn device(&self) -> Option<Rc<DeviceBuffer>> {
        self.device.borrow().clone()
    }

    pub fn is_resident(&self) -> bool {
        self.device.borrow().is_some()
    }

    pub fn host_bytes(&self) -> u64 {
        self.host.len()
    }

    /// Uploads the host copy if not resident; returns the bytes uploaded.
    pub fn make_resident(&self, context: &Context) -> Result<u64> {
        if self.is_resident() {
            return Ok(0);
        }
        let buffer = context.create_buffer_unchecked(self.buffer_size, "constant");
        self.host.upload(context.queue(), &buffer.buffer);
        *self.device.borrow_mut() = Some(Rc::new(buffer));
        Ok(self.host.len())
    }

    /// A graph using this constant became resident.
    pub fn acquire(&self, context: &Context) -> Result<u64> {
        let uploaded = self.make_resident(context)?;
        self.resident_users.set(self.resident_users.get() + 1);
        Ok(uploaded)
    }

    /// A graph using this constant left the GPU; the last one releases the device copy.
    pub fn release(&self) {
        let users = self.resident_users.get().saturating_sub(1);
        self.resident_users.set(users);
        if users == 0 {
            self.device.borrow_mut().take();
        }
    }

    /// Bytes that [`acquire`](Self::acquire) would allocate now.
    pub fn bytes_to_acquire(&self) -> u64 {
        if self.is_resident() {
            0
        } else {
            self.buffer_size
        }
    }
}
