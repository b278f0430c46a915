//! Conversion of a chunk of a stored tensor to its WebNN type (bfloat16, float16, quantized GGUF
//! blocks), and the options and costs of loading one: what the loader in `runtime::loader` needs
//! from the files, with no device.

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

use crate::error::{Error, Result};
use crate::operand::DataType;
use crate::weights::StoredType;

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
            // Blocks through half's slice conversion (F16C where the CPU has it): a miss of an
            // evicted float16 expert streams back at memory speed rather than element by element.
            let mut bits = [0u16; 1024];
            let mut floats = [0f32; 1024];
            for block in input.chunks(2 * bits.len()) {
                let n = block.len() / 2;
                bytemuck::cast_slice_mut::<u16, u8>(&mut bits[..n]).copy_from_slice(&block[..2 * n]);
                bits[..n].reinterpret_cast::<f16>().convert_to_f32_slice(&mut floats[..n]);
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
