//! Weight files, the web's `mmap` analogue: `openWeights()` reads only a file's header
//! (safetensors or GGUF) and lists its tensors; `constantTensor(name)` streams one tensor's bytes
//! to a GPU buffer in chunks, converting types WebNN lacks on the way, so peak host memory is a
//! few chunks whatever the tensor or file size.
//!
//! - [`source`]: the random-access byte source (native file, in-memory bytes, the browser's
//!   `Blob`).
//! - [`safetensors`], [`gguf`]: header readers that validate everything before any allocation
//!   sized by the file and never touch tensor data.
//! - [`convert`]: per-chunk conversion to the WebNN type, and the load options.
//!
//! Streaming tensors to the GPU (`constantTensor`) is the runtime's: `runtime::loader`.
//!
//! Malformed files are `DataError`s, types this loader cannot convert are `TypeError`s; every
//! message names the file, the tensor (when there is one) and the problem.

pub mod ahead;
pub mod convert;
pub mod gguf;
pub mod safetensors;
pub mod source;

pub use source::{BytesSource, FileSource, LocalFuture, RangeReader, Source};
#[cfg(target_arch = "wasm32")]
pub use source::BlobSource;
pub use convert::{LoadOptions, StreamStats};

use crate::error::{Error, Result};
use crate::operand::DataType;

/// A stored element type this loader converts to a WebNN type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredType {
    F32,
    F16,
    BF16,
    I32,
    U32,
    I8,
    U8,
    I64,
    Bool,
    /// ggml `block_q8_0`: float16 scale `d`, 32 int8 `qs`; `x = d * q`.
    Q8_0,
    /// ggml `block_q4_0`: float16 `d`, 16 bytes of nibbles; `x = d * (q - 8)`.
    Q4_0,
    /// ggml `block_q4_1`: float16 `d` and `m`, 16 bytes of nibbles; `x = d * q + m`.
    Q4_1,
}

impl StoredType {
    pub fn name(self) -> &'static str {
        match self {
            StoredType::F32 => "F32",
            StoredType::F16 => "F16",
            StoredType::BF16 => "BF16",
            StoredType::I32 => "I32",
            StoredType::U32 => "U32",
            StoredType::I8 => "I8",
            StoredType::U8 => "U8",
            StoredType::I64 => "I64",
            StoredType::Bool => "BOOL",
            StoredType::Q8_0 => "Q8_0",
            StoredType::Q4_0 => "Q4_0",
            StoredType::Q4_1 => "Q4_1",
        }
    }

    /// (elements, bytes) of one storage block; plain types have blocks of one element.
    pub fn block(self) -> (u64, u64) {
        match self {
            StoredType::F32 | StoredType::I32 | StoredType::U32 => (1, 4),
            StoredType::F16 | StoredType::BF16 => (1, 2),
            StoredType::I8 | StoredType::U8 | StoredType::Bool => (1, 1),
            StoredType::I64 => (1, 8),
            StoredType::Q8_0 => (32, 34),
            StoredType::Q4_0 => (32, 18),
            StoredType::Q4_1 => (32, 20),
        }
    }

    pub fn is_quantized(self) -> bool {
        matches!(self, StoredType::Q8_0 | StoredType::Q4_0 | StoredType::Q4_1)
    }

    /// The WebNN type the tensor becomes; `float` is the target of bfloat16 and quantized types.
    pub fn webnn_type(self, float: DataType) -> DataType {
        match self {
            StoredType::F32 => DataType::Float32,
            StoredType::F16 => DataType::Float16,
            StoredType::BF16 | StoredType::Q8_0 | StoredType::Q4_0 | StoredType::Q4_1 => float,
            StoredType::I32 | StoredType::I64 => DataType::Int32,
            StoredType::U32 => DataType::Uint32,
            StoredType::I8 => DataType::Int8,
            StoredType::U8 | StoredType::Bool => DataType::Uint8,
        }
    }
}

/// Which format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Safetensors,
    Gguf,
}

/// One tensor of a weight file, as its header describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// The type as the file names it (`"BF16"`, `"Q6_K"`).
    pub type_name: String,
    /// `None` for a type the loader knows but cannot convert (rejected on load with a `TypeError`).
    pub stored: Option<StoredType>,
    /// Row-major, outermost first (GGUF's `ne` order is reversed to this).
    pub shape: Vec<u64>,
    /// Absolute offset of the tensor's first byte in the file.
    pub offset: u64,
    pub byte_length: u64,
}

impl TensorInfo {
    /// Saturates, though the readers reject shapes whose count overflows.
    pub fn element_count(&self) -> u64 {
        self.shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }
}

/// Metadata values (safetensors' `__metadata__` strings, GGUF's typed key/values).
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetadataValue>),
}

/// An opened weight file: its header, validated; no tensor data has been read.
#[derive(Debug, Clone)]
pub struct WeightFile {
    pub file_name: String,
    pub format: Format,
    pub tensors: Vec<TensorInfo>,
    pub metadata: Vec<(String, MetadataValue)>,
}

impl WeightFile {
    /// `openWeights(source)`: recognises the format by its first bytes and reads the header.
    pub async fn open<S: Source>(source: &S) -> Result<WeightFile> {
        let mut magic = [0u8; 4];
        if source.len() >= 4 {
            source.read_at(0, &mut magic).await?;
        }
        if &magic == gguf::MAGIC {
            gguf::read_header(source).await
        } else {
            safetensors::read_header(source).await
        }
    }

    pub fn tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::Type(format!("{}: there is no tensor named '{name}'", self.file_name)))
    }

    pub fn metadata(&self, key: &str) -> Option<&MetadataValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// The most tensors a header may list (large mixture-of-experts checkpoints have tens of
/// thousands in one file).
pub const MAX_TENSORS: usize = 1 << 18;
/// The most dimensions a safetensors shape may have (GGUF's own limit is 4).
pub const MAX_DIMS: usize = 64;
/// The longest string a header may hold (names, metadata keys and values; chat templates are
/// the longest real ones, tens of KiB).
pub const MAX_STRING_BYTES: usize = 1 << 20;
/// Memory a parsed header may take per byte of header read, beyond [`HEADER_BUDGET_SLACK`]
/// (a tokenizer's int32 array takes 8 bytes parsed per byte on 64-bit targets).
const PARSED_PER_HEADER_BYTE: u64 = 8;
const HEADER_BUDGET_SLACK: u64 = 1 << 20;
/// The most memory a parsed header may take, whatever its size.
pub const MAX_PARSED_HEADER_BYTES: u64 = 256 << 20;

/// The memory a header's parse may allocate: charged before each allocation sized by the file,
/// so a hostile header fails with a `DataError` instead of exhausting memory (on the web, an
/// out-of-memory abort would kill every graph of the page).
pub(crate) struct HeaderBudget {
    used: u64,
    limit: u64,
}

impl HeaderBudget {
    /// The budget of a header of `header_bytes` bytes.
    pub(crate) fn new(header_bytes: u64) -> HeaderBudget {
        HeaderBudget { used: 0, limit: Self::limit(header_bytes) }
    }

    fn limit(header_bytes: u64) -> u64 {
        header_bytes.saturating_mul(PARSED_PER_HEADER_BYTE).saturating_add(HEADER_BUDGET_SLACK).min(MAX_PARSED_HEADER_BYTES)
    }

    /// Charges `bytes`; `Err(limit)` when they do not fit.
    pub(crate) fn charge(&mut self, bytes: u64) -> std::result::Result<(), u64> {
        match self.used.checked_add(bytes) {
            Some(used) if used <= self.limit => {
                self.used = used;
                Ok(())
            }
            _ => Err(self.limit),
        }
    }

    /// Raises the limit to that of a header of `header_bytes` bytes (one read as it goes).
    pub(crate) fn grow_to(&mut self, header_bytes: u64) {
        self.limit = self.limit.max(Self::limit(header_bytes));
    }
}

/// Element count of a shape, or a `DataError` when it overflows.
pub(crate) fn checked_elements(file: &str, tensor: &str, shape: &[u64]) -> Result<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(|| {
        Error::Data(format!("{file}: tensor '{tensor}': the shape {shape:?} has more elements than can be addressed"))
    })
}

/// Checks that the tensors' byte ranges (relative to the same origin) do not overlap.
pub(crate) fn check_no_overlap(file: &str, tensors: &[TensorInfo]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| (t.offset, t.byte_length));
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.offset + a.byte_length > b.offset {
            return Err(Error::Data(format!(
                "{file}: tensor '{}' (bytes {}..{}) overlaps tensor '{}' (bytes {}..{})",
                b.name,
                b.offset,
                b.offset + b.byte_length,
                a.name,
                a.offset,
                a.offset + a.byte_length
            )));
        }
    }
    Ok(())
}
