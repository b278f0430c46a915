//! The weight loader: streaming a tensor from its file to a GPU buffer. The bytes are read in
//! chunks of whole elements (whole blocks for quantized types), each chunk is converted to the
//! WebNN type (`weights::convert`) and written with `queue.write_buffer` at its offset. Two reusable host buffers (the chunk read
//! and its conversion) are all the host memory the loader holds, and a context-wide fence
//! ([`WriteFence`]) bounds the writes in flight so the driver's staging copies stay bounded
//! too. In the browser, tensors that need no conversion never pass through wasm memory: each group of
//! `max_chunks_in_flight` chunks is read into a reused JS staging buffer and handed to
//! `GPUQueue.writeBuffer` chunk by chunk in JS (`BlobRangeReader.writeTo`), which is the best
//! plain-JavaScript file-to-GPU path, with one call into JS and one fence per group.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::JsCast;

use crate::error::{Error, Result};
use crate::graph::{DataType, OperandDescriptor};
use crate::memory::host::write_padded;
use crate::memory::read_ahead::{FileRange, Prefetched, Windows};
use crate::weights::ahead::{file_range, read_source, Ahead};
use crate::memory::{FileBacked, Restream, SharedConstant};
use crate::ops::wgsl::buffer_size;
use crate::memory::host_cache::{HostCopy, HostCopySlot};
use crate::backend::webgpu::queue::{PendingCopy, PendingPass};
use crate::backend::webgpu::context::WeakContext;
use crate::backend::webgpu::{Context, Tensor, TensorDescriptor};
use crate::backend::webgpu::lanes::{Lane, Span};
use crate::weights::convert::{convert_chunk, LoadOptions, StreamStats};
use crate::weights::{Source, StoredType, TensorInfo, WeightFile};

impl WeightFile {
    /// The descriptor tensor `info` loads as on `context` (float16 for quantized types where it
    /// has `shader-f16`).
    pub fn descriptor(&self, context: &Context, info: &TensorInfo, options: &LoadOptions) -> Result<OperandDescriptor> {
        self.load_descriptor(info, options, context.has_shader_f16(), context.max_tensor_byte_length())
    }

    /// `MLWeightFile.constantTensor(name)`: a constant tensor whose bytes are streamed from
    /// `source` (the file this header was read from) to the GPU; `progress(loaded, total)` is
    /// called after each chunk with bytes of the file. The constant keeps `source` to stream
    /// its bytes again after it left the GPU (the `"disk"` tier).
    pub async fn constant_tensor<S: Source + 'static>(
        &self,
        context: &Context,
        source: &Rc<S>,
        name: &str,
        options: &LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(Tensor, StreamStats)> {
        if let Some(message) = context.lost_message() {
            return Err(Error::InvalidState(message));
        }
        let info = self.tensor(name)?;
        let descriptor = self.descriptor(context, info, options)?;
        let size = buffer_size(&descriptor);
        let file = FileTensor::new(context, source, info, &descriptor, options);
        // The buffer is created once a lane takes the tensor, so that the GPU process allocates
        // the buffers of tensors asked for together in the order they fill.
        let lane = file.lane(context).await;
        context.make_room(0, &|| size)?;
        // Streaming starts before the allocation check comes back from the GPU.
        let (buffer, allocated) = context.create_buffer_checked_later(size, "weight");
        let stats = file.stream_into(context, &buffer.buffer, progress, Some(lane), None).await?;
        // A first load submits its widening at once, so its staging is gone when this resolves
        // (a swap-in's waits for the dispatch that needs it).
        context.submit_pending();
        allocated.await?;
        let constant = Rc::new(SharedConstant::new_streamed(size, buffer, file));
        let descriptor = TensorDescriptor { operand: descriptor, readable: false, writable: false };
        Ok((Tensor::new_constant(context, descriptor, constant), stats))
    }
}

impl WeightFile {
    /// A constant tensor of tensor `name` whose GPU buffer is allocated but whose bytes are not
    /// streamed yet (`constantTensor(name, {wait: false})`): a graph can be built with it at once.
    /// Returns the constant too; its [`stream`](SharedConstant::stream) fills it, and a dispatch
    /// of a graph using it first streams it if nothing did.
    pub async fn pending_constant_tensor<S: Source + 'static>(
        &self,
        context: &Context,
        source: &Rc<S>,
        name: &str,
        options: &LoadOptions,
    ) -> Result<(Tensor, Rc<SharedConstant>)> {
        if let Some(message) = context.lost_message() {
            return Err(Error::InvalidState(message));
        }
        let info = self.tensor(name)?;
        let descriptor = self.descriptor(context, info, options)?;
        let size = buffer_size(&descriptor);
        context.make_room(0, &|| size)?;
        let buffer = context.create_buffer(size, "weight").await?;
        let file = FileTensor::new(context, source, info, &descriptor, options);
        let constant = Rc::new(SharedConstant::new_pending(size, buffer, file));
        let descriptor = TensorDescriptor { operand: descriptor, readable: false, writable: false };
        Ok((Tensor::new_constant(context, descriptor, constant.clone()), constant))
    }
}

/// A constant of a graph loaded from the graph cache: the `size` bytes of `source` are its
/// buffer's bytes, uploaded as they are (as uint32 words) when a graph using it is made
/// resident, and streamed again after it left the GPU, like any constant of a weight file.
pub(crate) fn saved_constant<S: Source + 'static>(context: &Context, source: &Rc<S>, size: u64) -> Rc<SharedConstant> {
    let words = size / 4;
    let info = TensorInfo {
        name: source.name().to_string(),
        type_name: StoredType::U32.name().into(),
        stored: Some(StoredType::U32),
        shape: vec![words],
        offset: 0,
        byte_length: size,
    };
    let descriptor = OperandDescriptor::new(DataType::Uint32, vec![words as u32]);
    let file = FileTensor::new(context, source, &info, &descriptor, &LoadOptions::default());
    Rc::new(SharedConstant::new_on_disk(size, file))
}

/// What a file-backed constant needs to stream its bytes again: the source, the tensor's
/// header entry and the WebNN type it was converted to.
struct FileTensor<S> {
    /// Weak: the context holds its constants, which hold this.
    context: WeakContext,
    source: Rc<S>,
    info: TensorInfo,
    target: DataType,
    options: LoadOptions,
    /// Its bytes in host memory (see [`HostCache`]), while the host budget keeps them.
    host_copy: HostCopySlot,
}

impl<S: Source + 'static> FileTensor<S> {
    /// What a file-backed constant needs to stream its bytes again.
    fn new(
        context: &Context,
        source: &Rc<S>,
        info: &TensorInfo,
        descriptor: &OperandDescriptor,
        options: &LoadOptions,
    ) -> Rc<Self> {
        Rc::new(FileTensor {
            context: context.downgrade(),
            source: source.clone(),
            info: info.clone(),
            target: descriptor.data_type,
            options: options.clone(),
            host_copy: HostCopySlot::default(),
        })
    }

    /// Waits for a lane to stream this tensor's bytes from the file.
    async fn lane(&self, context: &Context) -> Lane {
        let source = Rc::as_ptr(&self.source) as *const u8 as usize;
        let span = Span { source, start: self.info.offset, end: self.info.offset.saturating_add(self.info.byte_length) };
        context.inner.lanes.acquire(span).await
    }


    /// Fills `buffer` from the host copy if there is one, else from `ahead` (bytes read ahead)
    /// or the file (through `lane`, or a lane it waits for), keeping a host copy when the host
    /// budget has room for it.
    async fn stream_into(
        &self,
        context: &Context,
        buffer: &wgpu::Buffer,
        progress: &mut dyn FnMut(u64, u64),
        lane: Option<Lane>,
        ahead: Option<&Prefetched>,
    ) -> Result<StreamStats> {
        let memory = &context.inner.memory;
        let cache = &memory.host_cache;
        if let Some(copy) = self.host_copy.live() {
            copy.touch(memory.tick());
            restore(context, &copy, buffer)?;
            memory.bytes_uploaded.set(memory.bytes_uploaded.get() + copy.size);
            progress(self.info.byte_length, self.info.byte_length);
            return Ok(StreamStats { bytes_written: copy.size, ..StreamStats::default() });
        }
        let _lane = match (lane, ahead) {
            (Some(lane), _) => Some(lane),
            (None, Some(_)) => None,
            (None, None) => Some(self.lane(context).await),
        };
        let source = &Ahead { source: &*self.source, ahead };
        let info = &self.info;
        let stats = match host_copy_size(info, self.target) {
            Some(size) if cache.make_room(size) => {
                let scope = context.allocation_scope();
                context.inject_allocation_failure();
                let pinned = context.device().create_buffer(&wgpu::BufferDescriptor {
                    label: Some("host copy"),
                    size,
                    usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                });
                // Confirmed before anything writes to it or copies from it (a buffer the GPU could
                // not allocate invalidates the submission that copies from it); without it the
                // tensor streams straight to the GPU and keeps no host copy.
                if scope.close().await.is_some() {
                    pinned.destroy();
                    let destination = Destination::Queue(buffer);
                    let stats = stream_tensor(context, source, info, self.target, destination, &self.options, progress).await?;
                    memory.bytes_streamed_from_disk.set(memory.bytes_streamed_from_disk.get() + stats.bytes_read);
                    return Ok(stats);
                }
                let stats = stream_tensor(context, source, info, self.target, Destination::Host(&pinned), &self.options, progress).await?;
                pinned.unmap();
                let copy = cache.keep(pinned, size, memory.tick());
                restore(context, &copy, buffer)?;
                self.host_copy.set(copy);
                stats
            }
            _ => stream_tensor(context, source, info, self.target, Destination::Queue(buffer), &self.options, progress).await?,
        };
        memory.bytes_streamed_from_disk.set(memory.bytes_streamed_from_disk.get() + stats.bytes_read);
        Ok(stats)
    }
}

impl<S: Source + 'static> Restream for FileTensor<S> {
    fn restream<'a>(
        &'a self,
        buffer: &'a wgpu::Buffer,
        progress: &'a mut dyn FnMut(u64, u64),
        ahead: &'a Windows,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + 'a>> {
        Box::pin(async move {
            let context = self.context.upgrade().ok_or_else(|| Error::InvalidState("the MLContext is gone".into()))?;
            let ahead = ahead.find(self.file_range());
            Ok(self.stream_into(&context, buffer, progress, None, ahead).await?.bytes_read)
        })
    }
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

/// The bytes a host copy of `info` takes: the constant's bytes as `target`, in whole words.
/// Float16 is widened on the CPU into the copy, so that bringing it back is one GPU copy (on an
/// H200 an expert came back in 0.10-0.11 ms this way, against 0.12-0.20 ms for a copy of the
/// file's float16 bytes, a staging buffer and the widening kernel, for twice the host memory).
fn host_copy_size(info: &TensorInfo, target: DataType) -> Option<u64> {
    let (block_elements, block_bytes) = info.stored?.block();
    let bytes = (info.byte_length / block_bytes).checked_mul(block_elements)?.checked_mul(target.byte_size())?;
    Some(bytes.div_ceil(4) * 4)
}

/// Whether float16 is widened to float32 on the GPU: the file's bytes go up as they are (half the
/// upload, no pass over them on the CPU) and a kernel writes the float32 bits.
fn widens_on_gpu(context: &Context, stored: StoredType, target: DataType, options: &LoadOptions) -> bool {
    stored == StoredType::F16 && target == DataType::Float32 && options.widen_on_gpu.unwrap_or(!context.device_traits().cpu)
}

/// Where a stream writes: a GPU buffer through the queue, or a host copy mapped for writing
/// (whose bytes a GPU copy later moves, see [`restore`]).
#[derive(Clone, Copy)]
pub enum Destination<'b> {
    Queue(&'b wgpu::Buffer),
    Host(&'b wgpu::Buffer),
}

/// Queues the copy that fills `buffer` from a host copy for the next submission.
fn restore(context: &Context, copy: &HostCopy, buffer: &wgpu::Buffer) -> Result<()> {
    let from = copy.buffer().ok_or_else(|| Error::InvalidState("the host copy was evicted".into()))?;
    context.queue_copy(PendingCopy { from, to: buffer.clone(), size: copy.size });
    Ok(())
}

/// Streams `info`'s bytes from `source` into `buffer` as `target` (the tensor's WebNN type).
pub async fn stream_tensor<S: Source>(
    context: &Context,
    source: &S,
    info: &TensorInfo,
    target: DataType,
    destination: Destination<'_>,
    options: &LoadOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<StreamStats> {
    let file = source.name();
    let stored = info.stored.ok_or_else(|| {
        Error::Type(format!("{file}: tensor '{}': its type {} cannot be converted", info.name, info.type_name))
    })?;
    let (block_elements, block_bytes) = stored.block();
    let out_size = target.byte_size();
    // Whole blocks, and a multiple of 4 elements so every write but the last is 4-byte aligned.
    let unit_elements = if block_elements % 4 == 0 { block_elements } else { 4 };
    let unit_bytes = unit_elements / block_elements * block_bytes;
    // The larger of a chunk as read and as converted fits `chunk_bytes`, so the two host
    // buffers hold at most twice that.
    let unit_largest = unit_bytes.max(unit_elements * out_size);
    // An even count, so that every chunk of a host copy starts at a multiple of 8 bytes (the
    // mapping alignment).
    let units_per_chunk = (options.chunk_bytes / unit_largest / 2 * 2).max(2);
    let chunk_bytes = units_per_chunk * unit_bytes;
    let total = info.byte_length;
    let end = info.offset.checked_add(total).filter(|&e| e <= source.len()).ok_or_else(|| {
        Error::Data(format!("{file}: tensor '{}': its bytes go past the end of the file (truncated?)", info.name))
    })?;
    // A file's fault is a DataError; a GPU allocation that failed stays an UnknownError.
    let in_tensor = |e: Error| {
        let message = format!("{file}: tensor '{}': {}", info.name, e.message());
        match e {
            Error::Unknown(_) => Error::Unknown(message),
            _ => Error::Data(message),
        }
    };
    let lost = || {
        Error::InvalidState(format!("{file}: tensor '{}': the context was lost while streaming", info.name))
    };
    // Bytes that need no conversion go from the source to the queue as they are.
    let verbatim = matches!(
        stored,
        StoredType::F32 | StoredType::F16 | StoredType::I32 | StoredType::U32 | StoredType::I8 | StoredType::U8
    ) && stored.webnn_type(target) == target;

    let (buffer, to_queue) = match destination {
        Destination::Queue(b) => (b, true),
        Destination::Host(b) => (b, false),
    };
    // A host copy holds the constant's bytes: float16 is widened on the CPU into it.
    let widen = to_queue && widens_on_gpu(context, stored, target, options);

    let mut reader = source.reader(info.offset, total);
    // The context keeps the two host buffers between streams, so a swap-in reuses them rather
    // than faulting in fresh pages; not when they are larger than this stream's chunks (the
    // bound above), and a stream running meanwhile (in the browser) allocates its own.
    let (mut read, mut converted) = context.inner.loader_buffers.take();
    let converted_chunk = (chunk_bytes / block_bytes * block_elements * out_size) as usize;
    if read.capacity() > chunk_bytes as usize || converted.capacity() > converted_chunk {
        (read, converted) = (Vec::new(), Vec::new());
    }
    let mut stats = StreamStats::default();
    let fence = &context.inner.write_fence;
    let mut position = info.offset;
    let group = u64::from(options.max_chunks_in_flight.max(1));
    // A host copy is written through its mapping; only queue writes count against the fence.
    let mut direct = verbatim && to_queue;
    while position < end {
        let first_element = (position - info.offset) / block_bytes * block_elements;
        let offset = first_element * out_size;
        // A whole group of chunks at a time where the reader writes them itself (the browser:
        // read and writeBuffer in JS, never through wasm memory); one chunk at a time otherwise.
        let n = if direct { (end - position).min(chunk_bytes * group) } else { (end - position).min(chunk_bytes) };
        direct = direct
            && reader.write_next(n as usize, chunk_bytes as usize, context.queue(), buffer, offset).await.map_err(in_tensor)?;
        let (n, written, chunks) = if !to_queue && verbatim {
            let n = n.min(chunk_bytes) as usize;
            read_into_mapped(&mut *reader, buffer, offset, n).await.map_err(in_tensor)?;
            (n as u64, n as u64, 1)
        } else if widen {
            (n, widen_on_gpu(context, &mut *reader, n as usize, buffer, first_element).await.map_err(in_tensor)?, 1)
        } else if direct {
            (n, n, n.div_ceil(chunk_bytes))
        } else if verbatim {
            let n = n.min(chunk_bytes) as usize;
            read_into_staging(context.queue(), &mut *reader, buffer, offset, &[], n).await.map_err(in_tensor)?;
            (n as u64, n as u64, 1)
        } else {
            let n = n.min(chunk_bytes) as usize;
            if read.len() < n {
                read = vec![0u8; n];
            }
            let need = (n as u64 / block_bytes * block_elements * out_size) as usize;
            if converted.capacity() < need {
                // Cleared first: `reserve_exact` counts from the length a previous chunk left,
                // and growing while converting could double the capacity.
                converted.clear();
                converted.reserve_exact(need);
            }
            let chunk = &mut read[..n];
            reader.read(chunk).await.map_err(in_tensor)?;
            convert_chunk(file, &info.name, stored, target, first_element, chunk, &mut converted)?;
            if context.is_lost() {
                return Err(lost());
            }
            if to_queue {
                write_padded(context.queue(), buffer, offset, &converted);
            } else {
                write_mapped(buffer, offset, &converted)?;
            }
            (n as u64, converted.len() as u64, 1)
        };
        if context.is_lost() {
            return Err(lost());
        }
        stats.chunks += chunks;
        stats.bytes_read += n;
        stats.bytes_written += written;
        stats.peak_host_bytes = stats.peak_host_bytes.max((read.capacity() + converted.capacity()) as u64);
        position += n;
        if to_queue && fence.add_chunks(chunks, group) {
            fence.mark(context).await;
        }
        progress(position - info.offset, total);
    }
    context.inner.loader_buffers.replace((read, converted));
    // The last chunks wait for the next submission (or mark), which queue order puts before
    // any use: a swap-in of a few small tensors adds no submission of its own.
    Ok(stats)
}

/// Widens float16 to float32 exactly (signed zeros, subnormals, infinities; NaNs keep their
/// payload and come out quiet, as the CPU's conversion makes them): the
/// staging buffer holds `[first output word, element count]` and then the float16 elements.
const WIDEN_F16: &str = "@group(0) @binding(0) var<storage, read> staged: array<u32>;
@group(0) @binding(1) var<storage, read_write> widened: array<u32>;

fn widen(h: u32) -> u32 {
    let sign = (h & 0x8000u) << 16u;
    let exponent = (h >> 10u) & 0x1fu;
    let mantissa = h & 0x3ffu;
    if (exponent == 0x1fu && mantissa != 0u) { return sign | 0x7fc00000u | (mantissa << 13u); }
    if (exponent == 0x1fu) { return sign | 0x7f800000u; }
    if (exponent != 0u) { return sign | ((exponent + 112u) << 23u) | (mantissa << 13u); }
    if (mantissa == 0u) { return sign; }
    // A subnormal, mantissa * 2^-24, is a normal float32 with its leading bit made implicit.
    let top = firstLeadingBit(mantissa);
    return sign | ((top + 103u) << 23u) | ((mantissa << (23u - top)) & 0x7fffffu);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let pair = id.x + id.y * groups.x * 256u;
    let count = staged[1];
    let i = 2u * pair;
    if (i >= count) { return; }
    let halves = staged[2u + pair];
    widened[staged[0] + i] = widen(halves & 0xffffu);
    if (i + 1u < count) { widened[staged[0] + i + 1u] = widen(halves >> 16u); }
}
";

/// Streams `n` bytes of float16 elements from `reader` into a staging buffer and queues their
/// widening into `buffer` from element `first_element` on for the next submission; returns the
/// bytes it will write to `buffer`.
async fn widen_on_gpu(
    context: &Context,
    reader: &mut (dyn crate::weights::source::RangeReader + '_),
    n: usize,
    buffer: &wgpu::Buffer,
    first_element: u64,
) -> Result<u64> {
    let count = n as u64 / 2;
    let header = widening_header(first_element, count)?;
    // Inside an out-of-memory scope like every buffer; its verdict comes back while the chunk
    // is read, and a staging buffer the GPU could not allocate fails the load, not the widening.
    let (staging, allocated) = context.create_buffer_checked_later(8 + (n as u64).div_ceil(4) * 4, "float16 staging");
    let queue = context.queue();
    if reader.write_next(n, n.div_ceil(4) * 4, queue, &staging.buffer, 8).await? {
        queue.write_buffer(&staging.buffer, 0, &header);
    } else {
        read_into_staging(queue, reader, &staging.buffer, 0, &header, n).await?;
    }
    allocated.await?;
    let device = context.device();
    let pipeline = context.inner.pipelines.get(device, WIDEN_F16, 1, 1).await?;
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("widen float16"),
        layout: &pipeline.layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: staging.buffer.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: buffer.as_entire_binding() },
        ],
    });
    let groups = (count.div_ceil(2).div_ceil(256)).max(1);
    let max = context.limits().max_compute_workgroups_per_dimension.max(1) as u64;
    let (x, y) = (groups.min(max), groups.div_ceil(groups.min(max)));
    context.queue_pass(PendingPass { pipeline, group, grid: [x as u32, y as u32], _staging: staging });
    Ok(count * 4)
}

/// The widening kernel's input header: the first output element and the element count.
fn widening_header(first_element: u64, count: u64) -> Result<[u8; 8]> {
    match (u32::try_from(first_element), u32::try_from(count)) {
        (Ok(f), Ok(c)) if f.checked_add(c).is_some() => {
            let mut header = [0u8; 8];
            header[..4].copy_from_slice(&f.to_le_bytes());
            header[4..].copy_from_slice(&c.to_le_bytes());
            Ok(header)
        }
        _ => Err(Error::Type(format!("{count} elements at {first_element} are too many to widen on the GPU"))),
    }
}

/// Reads `n` bytes from `reader` straight into the queue's staging memory for `buffer` at
/// `offset`, after `prefix`, zero-padded to whole words: the file's bytes are copied once, into
/// what the GPU uploads, instead of into a host buffer and then into staging (on an H200 this
/// halved an expert miss's file-to-queue time).
async fn read_into_staging(
    queue: &wgpu::Queue,
    reader: &mut (dyn crate::weights::source::RangeReader + '_),
    buffer: &wgpu::Buffer,
    offset: u64,
    prefix: &[u8],
    n: usize,
) -> Result<()> {
    let size = (prefix.len() + n).div_ceil(4) * 4;
    let mut view = wgpu::BufferSize::new(size as u64)
        .and_then(|s| queue.write_buffer_with(buffer, offset, s))
        .ok_or_else(|| Error::Unknown(format!("{size} bytes at offset {offset} of a GPU buffer could not be staged")))?;
    let read = fill(writable(view.slice(..)), prefix, reader, n).await;
    drop(view);
    read
}

/// Reads `n` bytes from `reader` into `buffer`'s mapping at `at` (a multiple of 8), zero-padded
/// to whole words.
async fn read_into_mapped(
    reader: &mut (dyn crate::weights::source::RangeReader + '_),
    buffer: &wgpu::Buffer,
    at: u64,
    n: usize,
) -> Result<()> {
    let size = n.div_ceil(4) * 4;
    let mut view = buffer.get_mapped_range_mut(at..at + size as u64).map_err(|e| Error::Unknown(e.to_string()))?;
    let read = fill(writable(view.slice(..)), &[], reader, n).await;
    drop(view);
    read
}

/// Writes `prefix`, then `n` bytes read from `reader`, then zeros to the end of `bytes` (a
/// mapping sized for them).
async fn fill(
    bytes: &mut [u8],
    prefix: &[u8],
    reader: &mut (dyn crate::weights::source::RangeReader + '_),
    n: usize,
) -> Result<()> {
    let (head, rest) = bytes.split_at_mut(prefix.len());
    head.copy_from_slice(prefix);
    let (data, padding) = rest.split_at_mut(n);
    let read = reader.read(data).await;
    padding.fill(0);
    read
}

/// Copies `bytes` into `buffer`'s mapping at `at` (a multiple of 8), zero-padded to whole words.
fn write_mapped(buffer: &wgpu::Buffer, at: u64, bytes: &[u8]) -> Result<()> {
    let size = bytes.len().div_ceil(4) * 4;
    let mut view = buffer.get_mapped_range_mut(at..at + size as u64).map_err(|e| Error::Unknown(e.to_string()))?;
    let mut padded = bytes.to_vec();
    padded.resize(size, 0);
    view.slice(..).copy_from_slice(&padded);
    Ok(())
}

/// A write mapping as a byte slice, for reads from a file to land in it directly.
fn writable(mut mapping: wgpu::WriteOnly<'_, [u8]>) -> &mut [u8] {
    let len = mapping.len();
    // SAFETY: the mapping is `len` writable bytes borrowed for the slice's lifetime, which nothing
    // else reads or writes meanwhile; the slice is only written (file reads, headers, padding).
    unsafe { std::slice::from_raw_parts_mut(mapping.as_raw_element_ptr().as_ptr(), len) }
}

/// Bounds the chunk writes queued but not yet on the GPU (their staging copies belong to the
/// driver or the browser), for the whole context: a mark follows every group of
/// `max_chunks_in_flight` chunks, counted across tensors (and concurrent streams), and waits for
/// the writes before the mark `FENCE_DEPTH` marks earlier, so at most `FENCE_DEPTH + 1` groups
/// are in flight while reading goes on. No tensor waits for its own last writes: a wait per
/// tensor costs a GPU round trip that, on a loaded machine, took as long as reading the tensor;
/// and a tensor's last chunks go with the next submission, so a swap-in of a few small tensors
/// adds no submission of its own.
#[derive(Default)]
pub(crate) struct WriteFence {
    marks: RefCell<VecDeque<Marker>>,
    /// Chunks written since the last submission.
    chunks: Cell<u64>,
}

/// Marks not yet waited for: with groups of four 8 MiB chunks, at most 128 MiB in flight.
const FENCE_DEPTH: usize = 3;

#[cfg(not(target_arch = "wasm32"))]
type Marker = wgpu::SubmissionIndex;

#[cfg(target_arch = "wasm32")]
type Marker = wasm_bindgen_futures::JsFuture;

impl WriteFence {
    /// Counts `n` chunks written; `true` when a group is complete and a mark is due.
    fn add_chunks(&self, n: u64, group: u64) -> bool {
        self.chunks.set(self.chunks.get() + n);
        self.chunks.get() >= group
    }

    /// Every submission carries the writes before it to the GPU.
    pub(crate) fn submitted(&self) {
        self.chunks.set(0);
    }

    async fn mark(&self, context: &Context) {
        // The borrow ends before the await: concurrent streams share the queue.
        let oldest = {
            let mut marks = self.marks.borrow_mut();
            marks.extend(marker(context));
            if marks.len() > FENCE_DEPTH {
                marks.pop_front()
            } else {
                None
            }
        };
        if let Some(oldest) = oldest {
            wait(context, oldest).await;
        }
    }
}

/// Natively the submission of the pending passes (widening) marks the point.
#[cfg(not(target_arch = "wasm32"))]
fn marker(context: &Context) -> Option<Marker> {
    Some(context.submit_pending())
}

#[cfg(not(target_arch = "wasm32"))]
async fn wait(context: &Context, index: Marker) {
    let _ = context.device().poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None });
}

/// In the browser `onSubmittedWorkDone()` resolves once the writes before it reached the GPU;
/// pending passes go first, as their staging buffers are device memory.
#[cfg(target_arch = "wasm32")]
fn marker(context: &Context) -> Option<Marker> {
    context.submit_pending();
    let queue = context.queue().as_webgpu()?;
    let promise: js_sys::Promise = queue.on_submitted_work_done().unchecked_into();
    Some(wasm_bindgen_futures::JsFuture::from(promise))
}

#[cfg(target_arch = "wasm32")]
async fn wait(_context: &Context, done: Marker) {
    let _ = done.await;
}
