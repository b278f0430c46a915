//! The safetensors header: an 8-byte little-endian header length, then a JSON object mapping each
//! tensor name to `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to the first
//! byte after the header) plus an optional `__metadata__` object of strings. The tensors' byte
//! ranges must tile the data section exactly, as the reference implementation requires.

use crate::error::{Error, Result};
use crate::weights::{checked_elements, Format, MetadataValue, Source, StoredType, TensorInfo, WeightFile};

/// The reference implementation's limit on the JSON header.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Reads and validates the header; the length is checked against the file size before the
/// header is allocated.
pub async fn read_header<S: Source>(source: &S) -> Result<WeightFile> {
    let file = source.name();
    let file_len = source.len();
    if file_len < 8 {
        return Err(Error::Data(format!(
            "{file}: the file is {file_len} bytes, too short for the 8-byte safetensors header length"
        )));
    }
    let mut prefix = [0u8; 8];
    source.read_at(0, &mut prefix).await?;
    let header_len = u64::from_le_bytes(prefix);
    if header_len > file_len - 8 {
        return Err(Error::Data(format!(
            "{file}: the header length field claims {header_len} bytes but only {} bytes follow it (a truncated file, or not a safetensors file)",
            file_len - 8
        )));
    }
    if header_len > MAX_HEADER_BYTES {
        return Err(Error::Data(format!(
            "{file}: the header claims {header_len} bytes, more than the {MAX_HEADER_BYTES}-byte limit of safetensors headers"
        )));
    }
    let mut header = vec![0u8; header_len as usize];
    source.read_at(8, &mut header).await?;
    parse_header(file, &header, file_len)
}

/// Parses the JSON header of a file of `file_len` bytes.
pub fn parse_header(file: &str, header: &[u8], file_len: u64) -> Result<WeightFile> {
    let data_start = 8 + header.len() as u64;
    let data_len = file_len.checked_sub(data_start).ok_or_else(|| {
        Error::Data(format!("{file}: the header ({} bytes) is longer than the file ({file_len} bytes)", header.len()))
    })?;
    let json: serde_json::Value = serde_json::from_slice(header)
        .map_err(|e| Error::Data(format!("{file}: the header is not valid JSON: {e}")))?;
    let serde_json::Value::Object(entries) = json else {
        return Err(Error::Data(format!("{file}: the header is JSON but not an object of tensors")));
    };
    let mut tensors = Vec::new();
    let mut metadata = Vec::new();
    // (begin, end) relative to the data section, parallel to `tensors`.
    let mut ranges = Vec::new();
    for (name, value) in &entries {
        if name == "__metadata__" {
            metadata = parse_metadata(file, value)?;
            continue;
        }
        let (info, range) = parse_tensor(file, name, value, data_start, data_len)?;
        tensors.push(info);
        ranges.push(range);
    }
    check_tiling(file, &tensors, &ranges, data_len)?;
    Ok(WeightFile { file_name: file.to_string(), format: Format::Safetensors, tensors, metadata })
}

fn parse_metadata(file: &str, value: &serde_json::Value) -> Result<Vec<(String, MetadataValue)>> {
    let serde_json::Value::Object(map) = value else {
        return Err(Error::Data(format!("{file}: __metadata__ is not an object of strings")));
    };
    map.iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k.clone(), MetadataValue::String(s.clone()))),
            _ => Err(Error::Data(format!("{file}: __metadata__ entry '{k}' is not a string"))),
        })
        .collect()
}

/// The stored type of a dtype name: `Ok(Some)` converted by the loader, `Ok(None)` a real
/// safetensors type it cannot convert, with its element size for the header's byte checks.
fn dtype(file: &str, tensor: &str, name: &str) -> Result<(Option<StoredType>, u64)> {
    let supported = match name {
        "F32" => Some(StoredType::F32),
        "F16" => Some(StoredType::F16),
        "BF16" => Some(StoredType::BF16),
        "I32" => Some(StoredType::I32),
        "U32" => Some(StoredType::U32),
        "I8" => Some(StoredType::I8),
        "U8" => Some(StoredType::U8),
        "I64" => Some(StoredType::I64),
        "BOOL" => Some(StoredType::Bool),
        _ => None,
    };
    if let Some(t) = supported {
        return Ok((Some(t), t.block().1));
    }
    let size = match name {
        "F64" | "U64" => 8,
        "I16" | "U16" => 2,
        "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 1,
        _ => {
            return Err(Error::Data(format!("{file}: tensor '{tensor}': unknown dtype '{name}'")));
        }
    };
    Ok((None, size))
}

fn parse_tensor(
    file: &str,
    name: &str,
    value: &serde_json::Value,
    data_start: u64,
    data_len: u64,
) -> Result<(TensorInfo, (u64, u64))> {
    let bad = |problem: String| Error::Data(format!("{file}: tensor '{name}': {problem}"));
    let serde_json::Value::Object(fields) = value else {
        return Err(bad("the entry is not an object with dtype, shape and data_offsets".into()));
    };
    let type_name = match fields.get("dtype") {
        Some(serde_json::Value::String(s)) => s.clone(),
        _ => return Err(bad("dtype is missing or not a string".into())),
    };
    let shape = unsigned_array(fields.get("shape")).ok_or_else(|| bad("shape is missing or not an array of non-negative integers".into()))?;
    let offsets = unsigned_array(fields.get("data_offsets"))
        .filter(|o| o.len() == 2)
        .ok_or_else(|| bad("data_offsets is missing or not two non-negative integers".into()))?;
    let (begin, end) = (offsets[0], offsets[1]);
    let (stored, element_size) = dtype(file, name, &type_name)?;
    if end < begin {
        return Err(bad(format!("data_offsets [{begin}, {end}] end before they begin")));
    }
    if end > data_len {
        return Err(bad(format!(
            "data_offsets [{begin}, {end}] go past the end of the data section ({data_len} bytes; the file may be truncated)"
        )));
    }
    let elements = checked_elements(file, name, &shape)?;
    let needed = elements
        .checked_mul(element_size)
        .ok_or_else(|| bad(format!("shape {shape:?} of {type_name} needs more bytes than can be addressed")))?;
    if needed != end - begin {
        return Err(bad(format!(
            "shape {shape:?} of {type_name} needs {needed} bytes but data_offsets [{begin}, {end}] hold {}",
            end - begin
        )));
    }
    let info = TensorInfo { name: name.to_string(), type_name, stored, shape, offset: data_start + begin, byte_length: needed };
    Ok((info, (begin, end)))
}

fn unsigned_array(value: Option<&serde_json::Value>) -> Option<Vec<u64>> {
    match value? {
        serde_json::Value::Array(items) => items.iter().map(|v| v.as_u64()).collect(),
        _ => None,
    }
}

/// The byte ranges must cover the data section exactly once: no overlap, no gap, nothing after.
fn check_tiling(file: &str, tensors: &[TensorInfo], ranges: &[(u64, u64)], data_len: u64) -> Result<()> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| ranges[i]);
    let mut covered = 0u64;
    let mut previous: Option<usize> = None;
    for &i in &order {
        let (begin, end) = ranges[i];
        let name = &tensors[i].name;
        if begin < covered {
            let other = previous.map(|p| tensors[p].name.as_str()).unwrap_or("");
            return Err(Error::Data(format!(
                "{file}: tensor '{name}': data_offsets [{begin}, {end}] overlap tensor '{other}' (which ends at {covered})"
            )));
        }
        if begin > covered {
            return Err(Error::Data(format!(
                "{file}: tensor '{name}': data_offsets [{begin}, {end}] leave bytes {covered}..{begin} of the data section not covered by any tensor"
            )));
        }
        covered = end;
        previous = Some(i);
    }
    if covered != data_len {
        return Err(Error::Data(format!(
            "{file}: the tensors cover {covered} bytes but the data section has {data_len} bytes (trailing bytes not covered by any tensor)"
        )));
    }
    Ok(())
}
