//! A constant's bytes and where they live. Graphs (and a constant `MLTensor`) share one
//! [`SharedConstant`]; it stays on the GPU while any graph using it is resident, and its host
//! copy makes every swap-in an upload, never a recompile. A constant streamed from a weight file
//! has no host copy; until the disk tier can stream it again it stays on the GPU.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::Result;
use crate::memory::HostBytes;
use crate::runtime::{Context, DeviceBuffer};

pub struct SharedConstant {
    /// Size of the GPU buffer (the byte length rounded up to whole words).
    pub buffer_size: u64,
    /// `None` for a constant streamed from a weight file.
    host: Option<HostBytes>,
    device: RefCell<Option<Rc<DeviceBuffer>>>,
    resident_users: Cell<u32>,
}

impl SharedConstant {
    pub fn new(buffer_size: u64, host: HostBytes) -> SharedConstant {
        SharedConstant { buffer_size, host: Some(host), device: RefCell::new(None), resident_users: Cell::new(0) }
    }

    /// A constant whose bytes were streamed into `buffer` from a weight file.
    pub fn new_streamed(buffer_size: u64, buffer: DeviceBuffer) -> SharedConstant {
        SharedConstant {
            buffer_size,
            host: None,
            device: RefCell::new(Some(Rc::new(buffer))),
            resident_users: Cell::new(0),
        }
    }

    /// The device buffer, if resident.
    pub fn device(&self) -> Option<Rc<DeviceBuffer>> {
        self.device.borrow().clone()
    }

    pub fn is_resident(&self) -> bool {
        self.device.borrow().is_some()
    }

    pub fn host_bytes(&self) -> u64 {
        self.host.as_ref().map_or(0, |h| h.len())
    }

    /// Uploads the host copy if not resident; returns the bytes uploaded.
    pub fn make_resident(&self, context: &Context) -> Result<u64> {
        if self.is_resident() {
            return Ok(0);
        }
        // A streamed constant is never released (see `release`), so it is always resident here.
        let Some(host) = &self.host else { return Ok(0) };
        let buffer = context.create_buffer_unchecked(self.buffer_size, "constant");
        host.upload(context.queue(), &buffer.buffer);
        *self.device.borrow_mut() = Some(Rc::new(buffer));
        Ok(host.len())
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
        if users == 0 && self.host.is_some() {
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
