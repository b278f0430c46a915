//! A constant's bytes and where they live. Graphs (and a constant `MLTensor`) share one
//! [`SharedConstant`]; it stays on the GPU while any graph using it is resident. Its backing
//! makes every swap-in a reload, never a recompile: a host copy is uploaded, and a constant
//! streamed from a weight file (the `"disk"` tier) holds no host copy and is streamed again
//! from its file ([`Restream`] into a GPU buffer, [`Reread`] into the CPU backend's memory).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::memory::HostBytes;
use crate::memory::read_ahead::{FileRange, Windows};
use crate::memory::{Allocator, DeviceBuffer};

/// A constant that comes back from a weight file, with the host budget's copy it may keep.
pub trait FileBacked {
    /// The bytes of its copy in host memory (the host budget's), if it has one: the constant
    /// then comes back without reading the file.
    fn host_copy_bytes(&self) -> Option<u64>;

    /// Lets go of the host copy, if any (`swapOut({to: "disk"})`).
    fn drop_host_copy(&self);

    /// Where its bytes are in its file; `None` when they are not all there (a truncated file:
    /// reading the constant alone reports it).
    fn file_range(&self) -> Option<FileRange>;

    /// Reads `len` bytes of its file at `offset` (a merged range around its own, see
    /// `backend::read_ahead::ReadAhead`).
    fn read_file(&self, offset: u64, len: u64) -> Pin<Box<dyn Future<Output = Result<Vec<u8>>>>>;
}

/// Streams a weight file's tensor (source, tensor info, WebNN type) into a GPU buffer again,
/// from `ahead` where it holds the tensor's bytes; resolves to the bytes read from the file. The
/// loader's implementation holds a weak handle to its context, so residency needs no device type.
pub trait Restream: FileBacked {
    fn restream<'a>(
        &'a self,
        buffer: &'a wgpu::Buffer,
        progress: &'a mut dyn FnMut(u64, u64),
        ahead: &'a Windows,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + 'a>>;
}

/// Reads a weight file's tensor again into `out` (the CPU backend's memory: its bytes as the
/// constant's type), from the host copy if it has one, else from `ahead` where it holds the
/// tensor's bytes; resolves to the bytes read from the file.
pub trait Reread: FileBacked {
    /// The constant's bytes (`out`'s length).
    fn byte_length(&self) -> u64;
    fn reread<'a>(&'a self, out: &'a mut [u8], ahead: &'a Windows) -> Pin<Box<dyn Future<Output = Result<u64>> + 'a>>;
}

/// Where a constant's bytes come back from when it is made resident again.
enum Backing {
    Host(HostBytes),
    File(Rc<dyn Restream>),
    Reread(Rc<dyn Reread>),
}

pub struct SharedConstant {
    /// Size of the GPU buffer (the byte length rounded up to whole words).
    pub buffer_size: u64,
    backing: Backing,
    device: RefCell<Option<Rc<DeviceBuffer>>>,
    /// The device buffer is allocated but its bytes are still to be streamed from the file.
    stale: Cell<bool>,
    resident_users: Cell<u32>,
}

impl SharedConstant {
    pub fn new(buffer_size: u64, host: HostBytes) -> SharedConstant {
        SharedConstant::with(buffer_size, Backing::Host(host), None)
    }

    /// A constant whose bytes were streamed into `buffer` from a weight file; `file` streams
    /// them again after the constant left the GPU.
    pub fn new_streamed(buffer_size: u64, buffer: DeviceBuffer, file: Rc<dyn Restream>) -> SharedConstant {
        SharedConstant::with(buffer_size, Backing::File(file), Some(Rc::new(buffer)))
    }

    /// A file-backed constant whose `buffer` is allocated but not streamed yet: graphs can be
    /// built with it at once, and their dispatches wait for [`stream`](Self::stream).
    pub fn new_pending(buffer_size: u64, buffer: DeviceBuffer, file: Rc<dyn Restream>) -> SharedConstant {
        let constant = SharedConstant::new_streamed(buffer_size, buffer, file);
        constant.stale.set(true);
        constant
    }

    /// A file-backed constant in the `"disk"` tier: nothing is allocated or read until a graph
    /// using it is made resident (a graph loaded from the graph cache).
    pub fn new_on_disk(buffer_size: u64, file: Rc<dyn Restream>) -> SharedConstant {
        SharedConstant::with(buffer_size, Backing::File(file), None)
    }

    /// A constant of the CPU backend that comes back from a weight file (see [`Reread`]).
    pub fn new_reread(buffer_size: u64, file: Rc<dyn Reread>) -> SharedConstant {
        SharedConstant::with(buffer_size, Backing::Reread(file), None)
    }

    fn with(buffer_size: u64, backing: Backing, device: Option<Rc<DeviceBuffer>>) -> SharedConstant {
        SharedConstant {
            buffer_size,
            backing,
            device: RefCell::new(device),
            stale: Cell::new(false),
            resident_users: Cell::new(0),
        }
    }

    /// The device buffer, if resident with its bytes in place.
    pub fn device(&self) -> Option<Rc<DeviceBuffer>> {
        if self.stale.get() {
            return None;
        }
        self.device.borrow().clone()
    }

    pub fn is_resident(&self) -> bool {
        self.device.borrow().is_some()
    }

    fn file(&self) -> Option<&dyn FileBacked> {
        match &self.backing {
            Backing::Host(_) => None,
            Backing::File(file) => Some(&**file),
            Backing::Reread(file) => Some(&**file),
        }
    }

    /// The constant's range of its file and the way to read it, for a file-backed constant with
    /// no host copy (whose bytes come back from the file).
    pub fn file_read(&self) -> Option<(FileRange, &dyn FileBacked)> {
        let file = self.file().filter(|f| f.host_copy_bytes().is_none())?;
        Some((file.file_range()?, file))
    }

    /// Whether the constant comes from a weight file (and can go to the `"disk"` tier).
    pub fn is_file_backed(&self) -> bool {
        self.file().is_some()
    }

    /// The CPU backend's way back from the file, for a constant it loaded from one.
    pub fn reread(&self) -> Option<&Rc<dyn Reread>> {
        match &self.backing {
            Backing::Reread(file) => Some(file),
            _ => None,
        }
    }

    /// Whether its bytes are in host memory: a host copy, or a file-backed constant's copy under
    /// the host budget.
    pub fn has_host_copy(&self) -> bool {
        self.file().is_none_or(|file| file.host_copy_bytes().is_some())
    }

    /// Lets go of a file-backed constant's host copy (it streams from its file again).
    pub fn drop_host_copy(&self) {
        if let Some(file) = self.file() {
            file.drop_host_copy();
        }
    }

    /// Whether its device buffer still waits for [`stream`](Self::stream).
    pub fn needs_stream(&self) -> bool {
        self.stale.get()
    }

    /// The host copy of a constant held in host memory (`None` for a file-backed one).
    pub fn host(&self) -> Option<&HostBytes> {
        match &self.backing {
            Backing::Host(h) => Some(h),
            _ => None,
        }
    }

    /// A copy of the bytes of a constant held in host memory (`None` for a file-backed one).
    pub fn host_copy(&self) -> Option<Vec<u8>> {
        self.host().map(HostBytes::to_vec)
    }

    pub fn host_bytes(&self) -> u64 {
        match (&self.backing, self.file()) {
            (Backing::Host(h), _) => h.len(),
            (_, file) => file.and_then(|f| f.host_copy_bytes()).unwrap_or(0),
        }
    }

    /// Allocates the device buffer if not resident and uploads the host copy; a file-backed
    /// constant is left for [`stream`](Self::stream). Returns the bytes uploaded.
    pub fn make_resident(&self, allocator: &dyn Allocator) -> Result<u64> {
        if self.is_resident() {
            return Ok(0);
        }
        let buffer = match allocator.buffers().reuse(self.buffer_size) {
            Some(buffer) => buffer,
            None => allocator.create_buffer_unchecked(self.buffer_size, "constant"),
        };
        let uploaded = match &self.backing {
            Backing::Host(host) => {
                host.upload(allocator.queue(), &buffer.buffer);
                host.len()
            }
            Backing::File(_) | Backing::Reread(_) => {
                self.stale.set(true);
                0
            }
        };
        *self.device.borrow_mut() = Some(Rc::new(buffer));
        Ok(uploaded)
    }

    /// Streams a file-backed constant's bytes into its new device buffer, calling
    /// `progress(loaded, total)` after each chunk; returns the bytes read from the file (0 when
    /// nothing was pending).
    pub async fn stream(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<u64> {
        self.stream_from(progress, &Windows::default()).await
    }

    /// [`stream`](Self::stream) from `ahead` where it holds the constant's bytes.
    pub async fn stream_from(&self, progress: &mut dyn FnMut(u64, u64), ahead: &Windows) -> Result<u64> {
        let (Backing::File(file), true) = (&self.backing, self.stale.get()) else { return Ok(0) };
        // Held across the await: an eviction meanwhile drops only the constant's reference.
        let buffer = self
            .device
            .borrow()
            .clone()
            .ok_or_else(|| Error::InvalidState("the constant left the GPU before it was streamed".into()))?;
        let read = file.restream(&buffer.buffer, progress, ahead).await?;
        if self.device.borrow().as_ref().is_some_and(|b| Rc::ptr_eq(b, &buffer)) {
            self.stale.set(false);
        }
        Ok(read)
    }

    /// A graph using this constant became resident.
    pub fn acquire(&self, allocator: &dyn Allocator) -> Result<u64> {
        let uploaded = self.make_resident(allocator)?;
        self.resident_users.set(self.resident_users.get() + 1);
        Ok(uploaded)
    }

    /// A graph using this constant left the GPU; the last one releases the device copy.
    pub fn release(&self) {
        let users = self.resident_users.get().saturating_sub(1);
        self.resident_users.set(users);
        if users == 0 {
            // A buffer that nothing else holds (a stream in progress holds one) can be reused.
            if let Some(Ok(buffer)) = self.device.borrow_mut().take().map(Rc::try_unwrap) {
                buffer.recycle();
            }
            self.stale.set(false);
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
