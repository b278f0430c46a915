//! Constants from files on the CPU backend: a weight file's tensor (`constantTensor()`) and a
//! graph cache entry's constant (`loadGraph()`). Their bytes are read into the backend's memory
//! when a graph using them is made resident, and dropped when the last such graph leaves it
//! (the `"disk"` tier): no copy stays in host memory but the host budget's.

use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};

use crate::backend::cpu::context::{CpuContext, CpuInner};
use crate::backend::cpu::tensor::CpuTensor;
use crate::error::{Error, Result};
use crate::memory::host_cache::HostCopySlot;
use crate::memory::read_ahead::{FileRange, Windows};
use crate::weights::ahead::{file_range, read_source, Ahead};
use crate::memory::{FileBacked, HostBytes, Reread, SharedConstant};
use crate::operand::{DataType, OperandDescriptor};
use crate::weights::convert::read_tensor_into;
use crate::weights::{LoadOptions, Source, StoredType, TensorInfo, WeightFile};

/// What a file-backed constant needs to read its bytes again: the source, the tensor's header
/// entry and the constant it converts to.
struct FileTensor<S> {
    /// Weak: the context holds its constants, which hold this.
    context: Weak<CpuInner>,
    source: Rc<S>,
    file_name: String,
    info: TensorInfo,
    stored: StoredType,
    descriptor: OperandDescriptor,
    options: LoadOptions,
    /// Its bytes in host memory, while the host budget keeps them.
    host_copy: HostCopySlot,
}

impl<S: Source + 'static> FileBacked for FileTensor<S> {
    fn host_copy_bytes(&self) -> Option<u64> {
        self.host_copy.bytes()
    }

    fn drop_host_copy(&self) {
        self.host_copy.clear()
    }

    fn file_range(&self) -> Option<FileRange> {
        file_range(&self.source, &self.info)
    }

    fn read_file(&self, offset: u64, len: u64) -> crate::weights::source::LocalFuture<'static, Result<Vec<u8>>> {
        read_source(&self.source, offset, len)
    }
}

impl<S: Source + 'static> Reread for FileTensor<S> {
    fn byte_length(&self) -> u64 {
        self.descriptor.byte_length()
    }

    /// From the host copy if there is one; else from the bytes read ahead or the file, keeping a
    /// host copy when the host budget has room for it.
    fn reread<'a>(&'a self, out: &'a mut [u8], ahead: &'a Windows) -> Pin<Box<dyn Future<Output = Result<u64>> + 'a>> {
        Box::pin(async move {
            let context = self.context.upgrade().ok_or_else(|| Error::InvalidState("the MLContext is gone".into()))?;
            let memory = &context.memory;
            if let Some(copy) = self.host_copy.live() {
                if copy.copy_to(out) {
                    copy.touch(memory.tick());
                    return Ok(0);
                }
            }
            let source = Ahead { source: &*self.source, ahead: ahead.find(self.file_range()) };
            read_tensor_into(&self.file_name, &source, &self.info, self.stored, &self.descriptor, &self.options, out).await?;
            let read = self.info.byte_length;
            memory.bytes_streamed_from_disk.set(memory.bytes_streamed_from_disk.get() + read);
            if memory.host_cache.make_room(out.len() as u64) {
                let bytes = HostBytes::outside_wasm(out, &memory.host_bytes);
                self.host_copy.set(memory.host_cache.keep_bytes(bytes, memory.tick()));
            }
            Ok(read)
        })
    }
}

/// `constantTensor(name)` on the CPU backend: the tensor is read into the backend's memory now
/// (a truncated or corrupt file rejects here), and read again from the file whenever a graph
/// using it comes back from the `"disk"` tier.
pub async fn constant_tensor<S: Source + 'static>(
    context: &CpuContext,
    file: &WeightFile,
    source: &Rc<S>,
    info: &TensorInfo,
    descriptor: OperandDescriptor,
    options: &LoadOptions,
) -> Result<CpuTensor> {
    let stored = file.stored_type(info)?;
    let reread = FileTensor {
        context: Rc::downgrade(&context.inner),
        source: source.clone(),
        file_name: file.file_name.clone(),
        info: info.clone(),
        stored,
        descriptor: descriptor.clone(),
        options: options.clone(),
        host_copy: HostCopySlot::default(),
    };
    let constant = Rc::new(SharedConstant::new_reread(descriptor.byte_length().div_ceil(4) * 4, Rc::new(reread)));
    context.preload(&constant).await?;
    context.create_file_constant_tensor(descriptor, constant)
}

/// A constant of a graph loaded from the graph cache: the bytes of `source` as they are,
/// shared by key with the other loaded graphs of the context, and read when a graph using it
/// is made resident.
pub fn saved_constant<S: Source + 'static>(context: &CpuContext, key: &str, source: &Rc<S>) -> Rc<SharedConstant> {
    let mut saved = context.inner.saved_constants.borrow_mut();
    saved.retain(|_, weak| weak.strong_count() > 0);
    if let Some(constant) = saved.get(key).and_then(Weak::upgrade).filter(|c| c.buffer_size == source.len().div_ceil(4) * 4) {
        return constant;
    }
    let len = source.len();
    let info = TensorInfo {
        name: source.name().to_string(),
        type_name: StoredType::U8.name().into(),
        stored: Some(StoredType::U8),
        shape: vec![len],
        offset: 0,
        byte_length: len,
    };
    let reread = FileTensor {
        context: Rc::downgrade(&context.inner),
        source: source.clone(),
        file_name: source.name().to_string(),
        info,
        stored: StoredType::U8,
        // Only the byte count matters: uint8 bytes are copied as they are.
        descriptor: OperandDescriptor::new(DataType::Uint8, vec![len as u32]),
        options: LoadOptions::default(),
        host_copy: HostCopySlot::default(),
    };
    let constant = Rc::new(SharedConstant::new_reread(len.div_ceil(4) * 4, Rc::new(reread)));
    saved.insert(key.to_string(), Rc::downgrade(&constant));
    constant
}
