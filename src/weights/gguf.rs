//! The GGUF header (versions 2 and 3): magic `GGUF`, version, tensor count, metadata key/value
//! count, the typed key/values (arrays included), the tensor infos, and the data section that
//! starts at the next multiple of `general.alignment` (32 by default). Everything is
//! little-endian. The header is parsed from a prefix of the file that grows until it holds the
//! whole header, so a claimed length is checked against the file size before it is read.

use crate::error::{Error, Result};
use crate::weights::{
    check_no_overlap, checked_elements, Format, HeaderBudget, MetadataValue, Source, StoredType, TensorInfo,
    WeightFile, MAX_STRING_BYTES, MAX_TENSORS,
};

pub const MAGIC: &[u8; 4] = b"GGUF";
/// The largest header read (tokenizer vocabularies of large models are tens of MiB).
pub const MAX_HEADER_BYTES: u64 = 256 << 20;
/// `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;
const MAX_ARRAY_DEPTH: u32 = 4;
/// Metadata values kept in memory (a value of one file byte takes tens of bytes parsed); real
/// tokenizers hold about a million.
const MAX_METADATA_VALUES: u64 = 1 << 22;
const DEFAULT_ALIGNMENT: u64 = 32;

/// ggml's type table: (name, the loader's type if it converts it, elements per block, bytes per block).
fn ggml_type(t: u32) -> Option<(&'static str, Option<StoredType>, u64, u64)> {
    Some(match t {
        0 => ("F32", Some(StoredType::F32), 1, 4),
        1 => ("F16", Some(StoredType::F16), 1, 2),
        2 => ("Q4_0", Some(StoredType::Q4_0), 32, 18),
        3 => ("Q4_1", Some(StoredType::Q4_1), 32, 20),
        6 => ("Q5_0", None, 32, 22),
        7 => ("Q5_1", None, 32, 24),
        8 => ("Q8_0", Some(StoredType::Q8_0), 32, 34),
        9 => ("Q8_1", None, 32, 36),
        10 => ("Q2_K", None, 256, 84),
        11 => ("Q3_K", None, 256, 110),
        12 => ("Q4_K", None, 256, 144),
        13 => ("Q5_K", None, 256, 176),
        14 => ("Q6_K", None, 256, 210),
        15 => ("Q8_K", None, 256, 292),
        16 => ("IQ2_XXS", None, 256, 66),
        17 => ("IQ2_XS", None, 256, 74),
        18 => ("IQ3_XXS", None, 256, 98),
        19 => ("IQ1_S", None, 256, 50),
        20 => ("IQ4_NL", None, 32, 18),
        21 => ("IQ3_S", None, 256, 110),
        22 => ("IQ2_S", None, 256, 82),
        23 => ("IQ4_XS", None, 256, 136),
        24 => ("I8", Some(StoredType::I8), 1, 1),
        25 => ("I16", None, 1, 2),
        26 => ("I32", Some(StoredType::I32), 1, 4),
        27 => ("I64", Some(StoredType::I64), 1, 8),
        28 => ("F64", None, 1, 8),
        29 => ("IQ1_M", None, 256, 56),
        30 => ("BF16", Some(StoredType::BF16), 1, 2),
        34 => ("TQ1_0", None, 256, 54),
        35 => ("TQ2_0", None, 256, 66),
        39 => ("MXFP4", None, 32, 17),
        _ => return None,
    })
}

/// Why parsing a prefix stopped: it needs more of the file, or the file is bad.
enum Stop {
    More,
    Bad(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Bad(e)
    }
}

type Parse<T> = std::result::Result<T, Stop>;

struct Cursor<'a> {
    file: &'a str,
    buf: &'a [u8],
    file_len: u64,
    pos: u64,
    values: u64,
    budget: HeaderBudget,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        self.file_len - self.pos
    }

    /// `n` bytes; past the end of the file is a `DataError` naming `what`, past the prefix asks for more.
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Parse<&'a [u8]> {
        if n > self.remaining() {
            return Err(Stop::Bad(Error::Data(format!(
                "{}: {} at offset {} needs {n} bytes, past the end of the file ({} bytes; truncated or corrupt)",
                self.file,
                what(),
                self.pos,
                self.file_len
            ))));
        }
        let end = self.pos + n;
        if end > MAX_HEADER_BYTES {
            return Err(Stop::Bad(Error::Data(format!(
                "{}: {} at offset {} claims {n} bytes, past the {MAX_HEADER_BYTES}-byte limit of GGUF headers",
                self.file,
                what(),
                self.pos
            ))));
        }
        if end > self.buf.len() as u64 {
            return Err(Stop::More);
        }
        let bytes = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Parse<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Parse<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Parse<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Parse<String> {
        let len = self.u64(what)?;
        // Past the end of the file is reported as such by `take`.
        if len > MAX_STRING_BYTES as u64 && len <= self.remaining() {
            return Err(Stop::Bad(Error::Data(format!(
                "{}: {} at offset {} claims {len} bytes, past the {MAX_STRING_BYTES}-byte limit of strings",
                self.file,
                what(),
                self.pos
            ))));
        }
        let bytes = self.take(len, what)?;
        let text = String::from_utf8_lossy(bytes).into_owned();
        self.charge(text.len() as u64, 0, what)?;
        Ok(text)
    }

    /// Charges `bytes` of parsed memory to the budget, which grows with the header read so far
    /// and the `ahead` bytes that what is charged for will take in the file.
    fn charge(&mut self, bytes: u64, ahead: u64, what: &dyn Fn() -> String) -> Parse<()> {
        self.budget.grow_to(self.pos.saturating_add(ahead).min(MAX_HEADER_BYTES));
        self.budget.charge(bytes).map_err(|limit| {
            Stop::Bad(Error::Data(format!(
                "{}: {} at offset {} would take more than the {limit} bytes of memory allowed for a header of this size",
                self.file,
                what(),
                self.pos
            )))
        })
    }

    /// Fails early when `count` items of at least `min_size` bytes each cannot fit in the file,
    /// so a lying count never drives a long loop or an allocation.
    fn check_count(&self, count: u64, min_size: u64, what: &dyn Fn() -> String) -> Parse<()> {
        if count.checked_mul(min_size).is_none_or(|bytes| bytes > self.remaining()) {
            return Err(Stop::Bad(Error::Data(format!(
                "{}: {} claims {count} entries but only {} bytes remain in the file",
                self.file,
                what(),
                self.remaining()
            ))));
        }
        Ok(())
    }

    /// A metadata value of GGUF type `t`.
    fn value(&mut self, t: u32, depth: u32, what: &dyn Fn() -> String) -> Parse<MetadataValue> {
        self.values += 1;
        if self.values > MAX_METADATA_VALUES {
            return Err(Stop::Bad(Error::Data(format!(
                "{}: {}: the metadata holds more than {MAX_METADATA_VALUES} values",
                self.file,
                what()
            ))));
        }
        Ok(match t {
            0 => MetadataValue::U64(self.array::<1>(what)?[0] as u64),
            1 => MetadataValue::I64(self.array::<1>(what)?[0] as i8 as i64),
            2 => MetadataValue::U64(u16::from_le_bytes(self.array(what)?) as u64),
            3 => MetadataValue::I64(i16::from_le_bytes(self.array(what)?) as i64),
            4 => MetadataValue::U64(self.u32(what)? as u64),
            5 => MetadataValue::I64(i32::from_le_bytes(self.array(what)?) as i64),
            6 => MetadataValue::F64(f32::from_le_bytes(self.array(what)?) as f64),
            7 => match self.array::<1>(what)?[0] {
                0 => MetadataValue::Bool(false),
                1 => MetadataValue::Bool(true),
                b => return Err(Stop::Bad(Error::Data(format!("{}: {}: invalid bool byte {b}", self.file, what())))),
            },
            8 => MetadataValue::String(self.string(what)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(Stop::Bad(Error::Data(format!(
                        "{}: {}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels",
                        self.file,
                        what()
                    ))));
                }
                let element_type = self.u32(what)?;
                let count = self.u64(what)?;
                let min_size = min_value_size(self.file, element_type, what)?;
                self.check_count(count, min_size, what)?;
                if self.values.saturating_add(count) > MAX_METADATA_VALUES {
                    return Err(Stop::Bad(Error::Data(format!(
                        "{}: {}: an array of {count} values, more than the {MAX_METADATA_VALUES} values metadata may hold",
                        self.file,
                        what()
                    ))));
                }
                // check_count bounds `count * min_size` by the file's length.
                self.charge(count * std::mem::size_of::<MetadataValue>() as u64, count * min_size, what)?;
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(element_type, depth + 1, what)?);
                }
                MetadataValue::Array(items)
            }
            10 => MetadataValue::U64(self.u64(what)?),
            11 => MetadataValue::I64(i64::from_le_bytes(self.array(what)?)),
            12 => MetadataValue::F64(f64::from_le_bytes(self.array(what)?)),
            _ => return Err(Stop::Bad(Error::Data(format!("{}: {}: unknown value type {t}", self.file, what())))),
        })
    }
}

/// The fewest bytes a value of GGUF type `t` occupies.
fn min_value_size(file: &str, t: u32, what: &dyn Fn() -> String) -> Parse<u64> {
    Ok(match t {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => return Err(Stop::Bad(Error::Data(format!("{file}: {}: unknown array element type {t}", what())))),
    })
}

/// Reads and validates the header, growing the read prefix until it holds it.
pub async fn read_header<S: Source>(source: &S) -> Result<WeightFile> {
    let file = source.name();
    let file_len = source.len();
    let mut buf = Vec::new();
    let mut want = file_len.min(1 << 20);
    loop {
        let have = buf.len();
        // `want` never exceeds the file length nor MAX_HEADER_BYTES, so it fits in memory.
        buf.resize(want as usize, 0);
        source.read_at(have as u64, &mut buf[have..]).await?;
        match parse_prefix(file, &buf, file_len) {
            Ok(weights) => return Ok(weights),
            Err(Stop::Bad(e)) => return Err(e),
            Err(Stop::More) => {
                if want >= MAX_HEADER_BYTES {
                    return Err(Error::Data(format!(
                        "{file}: the GGUF header is larger than {MAX_HEADER_BYTES} bytes"
                    )));
                }
                want = (want * 2).min(file_len).min(MAX_HEADER_BYTES);
            }
        }
    }
}

/// Parses a whole header held in memory (`bytes` is the file or a prefix holding the header).
pub fn parse_header(file: &str, bytes: &[u8], file_len: u64) -> Result<WeightFile> {
    match parse_prefix(file, bytes, file_len) {
        Ok(w) => Ok(w),
        Err(Stop::Bad(e)) => Err(e),
        Err(Stop::More) => Err(Error::Data(format!("{file}: the bytes given end inside the GGUF header"))),
    }
}

fn parse_prefix(file: &str, buf: &[u8], file_len: u64) -> Parse<WeightFile> {
    let mut c =
        Cursor { file, buf, file_len: file_len.max(buf.len() as u64), pos: 0, values: 0, budget: HeaderBudget::new(0) };
    let magic = c.array::<4>(&|| "the GGUF magic".into())?;
    if &magic != MAGIC {
        return Err(Error::Data(format!("{file}: not a GGUF file: the magic is {magic:02x?}, not \"GGUF\"")).into());
    }
    let version = c.u32(&|| "the GGUF version".into())?;
    if version != 2 && version != 3 {
        return Err(
            Error::Data(format!("{file}: unsupported GGUF version {version} (versions 2 and 3 are read)")).into()
        );
    }
    let tensor_count = c.u64(&|| "the tensor count".into())?;
    let kv_count = c.u64(&|| "the metadata key/value count".into())?;
    // A key/value is at least a key length, a type and one byte; a tensor info at least a name
    // length, a dimension count, a type and an offset.
    c.check_count(kv_count, 13, &|| "the metadata key/value count".into())?;
    c.check_count(tensor_count, 24, &|| "the tensor count".into())?;
    if tensor_count > MAX_TENSORS as u64 {
        return Err(Error::Data(format!("{file}: the header lists {tensor_count} tensors, more than {MAX_TENSORS}")).into());
    }
    if kv_count > MAX_METADATA_VALUES {
        return Err(Error::Data(format!(
            "{file}: the header lists {kv_count} metadata key/values, more than {MAX_METADATA_VALUES}"
        ))
        .into());
    }
    // Both counts are bounded by the file's length above.
    c.charge(kv_count * std::mem::size_of::<(String, MetadataValue)>() as u64, kv_count * 13, &|| {
        "the metadata key/values".into()
    })?;
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..kv_count {
        let key = c.string(&|| format!("metadata key #{i}"))?;
        let what = || format!("metadata key '{key}'");
        let t = c.u32(&what)?;
        let value = c.value(t, 0, &what)?;
        if key == "general.alignment" {
            alignment = match value {
                MetadataValue::U64(a) if t == 4 && a.is_power_of_two() => a,
                _ => {
                    return Err(Error::Data(format!(
                        "{file}: general.alignment must be a uint32 power of two, not {value:?}"
                    ))
                    .into())
                }
            };
        }
        metadata.push((key, value));
    }

    // A tensor info and its name's entry in `names`.
    let tensor_size = (std::mem::size_of::<TensorInfo>() + 2 * std::mem::size_of::<String>()) as u64;
    c.charge(tensor_count * tensor_size, tensor_count * 24, &|| "the tensor infos".into())?;
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count as usize);
    let mut names = std::collections::HashSet::with_capacity(tensor_count as usize);
    for i in 0..tensor_count {
        let name = c.string(&|| format!("the name of tensor #{i}"))?;
        let what = || format!("tensor '{name}'");
        let bad = |problem: String| Stop::Bad(Error::Data(format!("{file}: tensor '{name}': {problem}")));
        let n_dims = c.u32(&what)?;
        if n_dims > MAX_DIMS {
            return Err(bad(format!("{n_dims} dimensions, more than ggml's {MAX_DIMS}")));
        }
        // The shape, the type name and the name's second copy in `names`.
        c.charge(8 * n_dims as u64 + 8 + name.len() as u64, 0, &what)?;
        let mut ne = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            ne.push(c.u64(&what)?);
        }
        let t = c.u32(&what)?;
        let relative = c.u64(&what)?;
        let (type_name, stored, block_elements, block_bytes) =
            ggml_type(t).ok_or_else(|| bad(format!("unknown ggml type {t}")))?;
        // A scalar is a row of one element.
        let row = ne.first().copied().unwrap_or(1);
        if row % block_elements != 0 {
            return Err(bad(format!(
                "rows of {row} elements are not a whole number of {type_name} blocks of {block_elements}"
            )));
        }
        let shape: Vec<u64> = ne.iter().rev().copied().collect();
        let elements = checked_elements(file, &name, &shape).map_err(Stop::Bad)?;
        let byte_length = (elements / block_elements)
            .checked_mul(block_bytes)
            .ok_or_else(|| bad(format!("shape {shape:?} of {type_name} needs more bytes than can be addressed")))?;
        if relative % alignment != 0 {
            return Err(bad(format!("data offset {relative} is not a multiple of the alignment {alignment}")));
        }
        if !names.insert(name.clone()) {
            return Err(bad("the name appears twice".into()));
        }
        tensors.push(TensorInfo {
            name: name.clone(),
            type_name: type_name.to_string(),
            stored,
            shape,
            offset: relative,
            byte_length,
        });
    }

    let data_start = c.pos.div_ceil(alignment).saturating_mul(alignment);
    for t in &mut tensors {
        let end = data_start.checked_add(t.offset).and_then(|s| s.checked_add(t.byte_length));
        if end.is_none_or(|end| end > c.file_len) {
            return Err(Error::Data(format!(
                "{file}: tensor '{}': its {} bytes at data offset {} (file offset {}) go past the end of the file ({} bytes; truncated?)",
                t.name,
                t.byte_length,
                t.offset,
                data_start.saturating_add(t.offset),
                c.file_len
            ))
            .into());
        }
        t.offset += data_start;
    }
    check_no_overlap(file, &tensors)?;
    Ok(WeightFile { file_name: file.to_string(), format: Format::Gguf, tensors, metadata })
}
