//! Conversion of a chunk of a stored tensor to its WebNN type (bfloat16, float16, quantized GGUF
//! blocks), and the options and costs of loading one: what the loader in `runtime::loader` needs
//! from the files, with no device.

use half::f16;

use crate::error::{Error, Result};
use crate::operand::{DataType, OperandDescriptor};
use crate::weights::{Source, StoredType, TensorInfo, WeightFile};

/// How a tensor is streamed.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The WebNN type of bfloat16 and quantized tensors: float32 or float16. `None`: float32
    /// for bfloat16 (exact), float16 for quantized types when the context has `shader-f16`.
    /// `Some(Float32)` also widens float16 tensors (exactly), for float32 graphs; otherwise
    /// float16 tensors stay float16 and stream verbatim.
    pub float_type: Option<DataType>,
    /// Bytes of the larger of a chunk as read and as converted (rounded down to whole elements
    /// or blocks); the loader's host buffers hold at most twice this.
    pub chunk_bytes: u64,
    /// Chunks written to the queue between marks of the context's write fence (a group: at
    /// most four groups are in flight while reading goes on, see [`WriteFence`]).
    pub max_chunks_in_flight: u32,
    /// Where float16 is widened to float32: `Some(true)` on the GPU (the file's bytes uploaded
    /// as they are, then a kernel), `Some(false)` on the CPU; `None`: on the GPU unless the
    /// adapter is a CPU (llvmpipe, SwiftShader), where the kernel runs on the same cores and is
    /// slower than the CPU's own vector conversion.
    pub widen_on_gpu: Option<bool>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { float_type: None, chunk_bytes: 8 << 20, max_chunks_in_flight: 4, widen_on_gpu: None }
    }
}

/// What one streamed tensor cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub chunks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The most bytes the streaming buffers held at once (read chunk plus converted chunk).
    pub peak_host_bytes: u64,
}

/// Converts whole elements (whole blocks) of `stored` to `target`'s little-endian bytes in
/// `out`; `first_element` is the index of the chunk's first element in the tensor (for messages).
pub fn convert_chunk(
    file: &str,
    tensor: &str,
    stored: StoredType,
    target: DataType,
    first_element: u64,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    let put_float = |out: &mut Vec<u8>, x: f32| match target {
        DataType::Float16 => out.extend_from_slice(&f16::from_f32(x).to_le_bytes()),
        _ => out.extend_from_slice(&x.to_le_bytes()),
    };
    let convertible = match stored {
        StoredType::BF16 | StoredType::Q8_0 | StoredType::Q4_0 | StoredType::Q4_1 => target.is_float(),
        StoredType::F16 => matches!(target, DataType::Float16 | DataType::Float32),
        _ => stored.webnn_type(target) == target,
    };
    if !convertible {
        return Err(Error::Type(format!("{file}: tensor '{tensor}': {} cannot become {target}", stored.name())));
    }
    match stored {
        StoredType::F16 if target == DataType::Float32 => {
            // In blocks, vectorized: a miss of an evicted float16 expert streams back at memory
            // speed rather than element by element.
            let mut bits = [0u16; 1024];
            let mut floats = [0f32; 1024];
            for block in input.chunks(2 * bits.len()) {
                let n = block.len() / 2;
                bytemuck::cast_slice_mut::<u16, u8>(&mut bits[..n]).copy_from_slice(&block[..2 * n]);
                crate::operand::widen_f16(&bits[..n], &mut floats[..n]);
                // Native order is little-endian on every target (wasm32, x86-64, aarch64).
                out.extend_from_slice(bytemuck::cast_slice(&floats[..n]));
            }
        }
        StoredType::F32 | StoredType::F16 | StoredType::I32 | StoredType::U32 | StoredType::I8 | StoredType::U8 => {
            out.extend_from_slice(input)
        }
        StoredType::Bool => out.extend(input.iter().map(|&b| (b != 0) as u8)),
        StoredType::BF16 => {
            for b in input.chunks_exact(2) {
                put_float(out, f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16));
            }
        }
        StoredType::I64 => {
            for (i, b) in input.chunks_exact(8).enumerate() {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(b);
                let v = i64::from_le_bytes(bytes);
                let v = i32::try_from(v).map_err(|_| {
                    Error::Type(format!(
                        "{file}: tensor '{tensor}': element {} is {v}, which int32 cannot represent",
                        first_element + i as u64
                    ))
                })?;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        StoredType::Q8_0 => {
            for block in input.chunks_exact(34) {
                let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
                for &q in &block[2..] {
                    put_float(out, d * (q as i8) as f32);
                }
            }
        }
        StoredType::Q4_0 => {
            for block in input.chunks_exact(18) {
                let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
                let qs = &block[2..];
                for &q in qs {
                    put_float(out, ((q & 0x0F) as i32 - 8) as f32 * d);
                }
                for &q in qs {
                    put_float(out, ((q >> 4) as i32 - 8) as f32 * d);
                }
            }
        }
        StoredType::Q4_1 => {
            for block in input.chunks_exact(20) {
                let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
                let m = f16::from_le_bytes([block[2], block[3]]).to_f32();
                let qs = &block[4..];
                for &q in qs {
                    put_float(out, (q & 0x0F) as f32 * d + m);
                }
                for &q in qs {
                    put_float(out, (q >> 4) as f32 * d + m);
                }
            }
        }
    }
    Ok(())
}

impl WeightFile {
    /// The WebNN type a tensor becomes under `options`; `float16` says whether quantized types
    /// default to float16 (a device with `shader-f16`).
    pub fn webnn_type(&self, info: &TensorInfo, options: &LoadOptions, float16: bool) -> Result<DataType> {
        let stored = self.stored_type(info)?;
        let float = match options.float_type {
            Some(t @ (DataType::Float32 | DataType::Float16)) => t,
            Some(t) => {
                return Err(Error::Type(format!(
                    "{}: tensor '{}': {} cannot become {t}; only float32 or float16",
                    self.file_name, info.name, info.type_name
                )))
            }
            None if stored.is_quantized() && float16 => DataType::Float16,
            None => DataType::Float32,
        };
        if stored == StoredType::F16 && options.float_type == Some(DataType::Float32) {
            return Ok(DataType::Float32);
        }
        Ok(stored.webnn_type(float))
    }

    pub(crate) fn stored_type(&self, info: &TensorInfo) -> Result<StoredType> {
        info.stored.ok_or_else(|| {
            Error::Type(format!(
                "{}: tensor '{}': its type {} has no WebNN equivalent this loader converts to",
                self.file_name, info.name, info.type_name
            ))
        })
    }

    /// The `MLOperandDescriptor` of the constant a tensor becomes.
    /// The descriptor tensor `info` loads as, checked against a backend's `maxTensorByteLength`.
    pub fn load_descriptor(&self, info: &TensorInfo, options: &LoadOptions, float16: bool, max_tensor_byte_length: u64) -> Result<OperandDescriptor> {
        let data_type = self.webnn_type(info, options, float16)?;
        let shape =
            info.shape.iter().map(|&d| u32::try_from(d).ok()).collect::<Option<Vec<u32>>>().ok_or_else(|| {
                Error::Type(format!(
                    "{}: tensor '{}': a dimension of {:?} is too large",
                    self.file_name, info.name, info.shape
                ))
            })?;
        let descriptor = OperandDescriptor::new(data_type, shape);
        descriptor
            .check_dimensions()
            .and_then(|_| descriptor.check_byte_length_limit(max_tensor_byte_length))
            .map_err(|e| Error::Type(format!("{}: tensor '{}': {}", self.file_name, info.name, e.message())))?;
        Ok(descriptor)
    }

    /// Reads tensor `info` from `source` (the file this header came from) and converts it to
    /// `descriptor`'s type on the host, in chunks of about `options.chunk_bytes`: the whole
    /// tensor for a backend that holds it in its own memory.
    pub async fn read_tensor<S: Source>(&self, source: &S, info: &TensorInfo, descriptor: &OperandDescriptor, options: &LoadOptions) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        out.try_reserve_exact(descriptor.byte_length() as usize)
            .map_err(|_| Error::Unknown(format!("{}: tensor '{}': {} bytes of memory could not be allocated", self.file_name, info.name, descriptor.byte_length())))?;
        out.resize(descriptor.byte_length() as usize, 0);
        read_tensor_into(&self.file_name, source, info, self.stored_type(info)?, descriptor, options, &mut out).await?;
        Ok(out)
    }
}

/// Reads tensor `info` of file `file_name` from `source` into `out` (exactly `descriptor`'s
/// bytes), converting each chunk from `stored` to `descriptor`'s type on the way.
pub(crate) async fn read_tensor_into<S: Source>(
    file_name: &str,
    source: &S,
    info: &TensorInfo,
    stored: StoredType,
    descriptor: &OperandDescriptor,
    options: &LoadOptions,
    out: &mut [u8],
) -> Result<()> {
    if out.len() as u64 != descriptor.byte_length() {
        return Err(Error::Data(format!("{file_name}: tensor '{}': {} bytes asked for {descriptor}", info.name, out.len())));
    }
    let target = descriptor.data_type;
    let (block_elements, block_bytes) = stored.block();
    let blocks_per_chunk = (options.chunk_bytes / block_bytes).max(1);
    let mut reader = source.reader(info.offset, info.byte_length);
    let (mut read, mut written, mut chunk, mut converted) = (0u64, 0usize, Vec::new(), Vec::new());
    // Checks that the conversion is one the loader makes (an empty chunk converts nothing).
    convert_chunk(file_name, &info.name, stored, target, 0, &[], &mut converted)?;
    let widen = stored == StoredType::F16 && target == DataType::Float32;
    let verbatim = !widen && matches!(stored, StoredType::F32 | StoredType::F16 | StoredType::I32 | StoredType::U32 | StoredType::I8 | StoredType::U8);
    let too_long = || Error::Data(format!("{file_name}: tensor '{}': more bytes read than {descriptor} holds", info.name));
    while read < info.byte_length {
        let len = (blocks_per_chunk * block_bytes).min(info.byte_length - read) as usize;
        // The file's bytes are the constant's: read into place. float16 is widened from the
        // chunk straight into place. Anything else converts through a buffer.
        if verbatim {
            reader.read(out.get_mut(written..written + len).ok_or_else(too_long)?).await?;
            written += len;
            read += len as u64;
            continue;
        }
        chunk.resize(len, 0);
        reader.read(&mut chunk).await?;
        let place = if widen { out.get_mut(written..written + 2 * len).and_then(|o| bytemuck::try_cast_slice_mut::<u8, f32>(o).ok()) } else { None };
        let halves = bytemuck::try_cast_slice::<u8, u16>(&chunk).ok();
        if let (Some(place), Some(halves)) = (place, halves) {
            crate::operand::widen_f16(halves, place);
            written += 2 * len;
        } else {
            convert_chunk(file_name, &info.name, stored, target, read / block_bytes * block_elements, &chunk, &mut converted)?;
            out.get_mut(written..written + converted.len()).ok_or_else(too_long)?.copy_from_slice(&converted);
            written += converted.len();
        }
        read += len as u64;
    }
    if written != out.len() {
        return Err(Error::Data(format!("{file_name}: tensor '{}': {written} bytes read for {descriptor}", info.name)));
    }
    Ok(())
}