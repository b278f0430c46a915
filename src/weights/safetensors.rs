//! The safetensors header: an 8-byte little-endian header length, then a JSON object mapping each
//! tensor name to `{dtype, shape, data_offsets: [begin, end]}` (offsets relative to the first
//! byte after the header) plus an optional `__metadata__` object of strings. The tensors' byte
//! ranges must tile the data section exactly, as the reference implementation requires.

use std::cell::RefCell;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{Error, Result};
use crate::weights::{
    checked_elements, Format, HeaderBudget, MetadataValue, Source, StoredType, TensorInfo, WeightFile, MAX_DIMS,
    MAX_STRING_BYTES, MAX_TENSORS,
};

/// The reference implementation's limit on the JSON header.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;
/// `__metadata__` holds a few strings in real files.
const MAX_METADATA_ENTRIES: usize = 1 << 16;

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

/// Parses the JSON header of a file of `file_len` bytes. The JSON is streamed into the tensor
/// list, never into a tree of values: entries, dimensions and strings are counted and their
/// memory charged to a [`HeaderBudget`] before they are allocated.
pub fn parse_header(file: &str, header: &[u8], file_len: u64) -> Result<WeightFile> {
    let data_start = 8 + header.len() as u64;
    let data_len = file_len.checked_sub(data_start).ok_or_else(|| {
        Error::Data(format!("{file}: the header ({} bytes) is longer than the file ({file_len} bytes)", header.len()))
    })?;
    let parser = Parser {
        file,
        data_start,
        data_len,
        budget: RefCell::new(HeaderBudget::new(header.len() as u64)),
        failure: RefCell::new(None),
    };
    // A first pass counts the entries without allocating, so the list is allocated once, exactly.
    let entries = parser.run(header, Count(&parser))?;
    parser.charge(entries as u64 * std::mem::size_of::<TensorInfo>() as u64, || format!("{entries} tensors"))?;
    let (mut tensors, mut metadata) = parser.run(header, Entries { parser: &parser, capacity: entries })?;
    tensors.sort_unstable_by(|a, b| (a.offset, a.byte_length).cmp(&(b.offset, b.byte_length)));
    check_tiling(file, &tensors, data_start, data_len)?;
    tensors.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = tensors.windows(2).find(|pair| pair[0].name == pair[1].name) {
        return Err(Error::Data(format!("{file}: tensor '{}': the name appears twice", pair[0].name)));
    }
    metadata.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if let Some(pair) = metadata.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(Error::Data(format!("{file}: __metadata__ entry '{}' appears twice", pair[0].0)));
    }
    Ok(WeightFile { file_name: file.to_string(), format: Format::Safetensors, tensors, metadata })
}

/// The state of one header's parse. A visitor that finds a problem stores the crate's error in
/// `failure` and stops serde with a placeholder error.
struct Parser<'a> {
    file: &'a str,
    data_start: u64,
    data_len: u64,
    budget: RefCell<HeaderBudget>,
    failure: RefCell<Option<Error>>,
}

impl Parser<'_> {
    fn run<'de, V: Visitor<'de>>(&self, header: &'de [u8], visitor: V) -> Result<V::Value> {
        let mut json = serde_json::Deserializer::from_slice(header);
        let value = json.deserialize_map(visitor).and_then(|v| json.end().map(|_| v));
        value.map_err(|e| {
            self.failure.borrow_mut().take().unwrap_or_else(|| {
                if e.is_data() {
                    Error::Data(format!("{}: the header is JSON but not an object of tensors: {e}", self.file))
                } else {
                    Error::Data(format!("{}: the header is not valid JSON: {e}", self.file))
                }
            })
        })
    }

    fn fail<E: de::Error>(&self, error: Error) -> E {
        *self.failure.borrow_mut() = Some(error);
        E::custom("invalid header")
    }

    fn charge(&self, bytes: u64, what: impl FnOnce() -> String) -> Result<()> {
        self.budget.borrow_mut().charge(bytes).map_err(|limit| {
            Error::Data(format!(
                "{}: {} would take more than the {limit} bytes of memory allowed for this header",
                self.file,
                what()
            ))
        })
    }

    /// A string of at most [`MAX_STRING_BYTES`], charged to the budget.
    fn string<E: de::Error>(&self, s: &str, what: &dyn Fn() -> String) -> std::result::Result<String, E> {
        if s.len() > MAX_STRING_BYTES {
            return Err(self.fail(Error::Data(format!(
                "{}: {} is {} bytes long, past the {MAX_STRING_BYTES}-byte limit of strings",
                self.file,
                what(),
                s.len()
            ))));
        }
        self.charge(s.len() as u64, what).map_err(|e| self.fail(e))?;
        Ok(s.to_string())
    }
}

/// Counts the header's entries, skipping their values.
struct Count<'a>(&'a Parser<'a>);

impl<'de> Visitor<'de> for Count<'_> {
    type Value = usize;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object of tensors")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<usize, A::Error> {
        let mut count = 0usize;
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
            count += 1;
            // One more than the tensors for `__metadata__`.
            if count > MAX_TENSORS + 1 {
                return Err(self.0.fail(Error::Data(format!(
                    "{}: the header lists more than {MAX_TENSORS} tensors",
                    self.0.file
                ))));
            }
        }
        Ok(count)
    }
}

/// Any JSON value, read without keeping it; nesting is bounded by serde_json's recursion limit.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Skip, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> std::result::Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

/// The second pass: the tensors, each checked as it is read, and `__metadata__`.
struct Entries<'a> {
    parser: &'a Parser<'a>,
    capacity: usize,
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = (Vec<TensorInfo>, Vec<(String, MetadataValue)>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object of tensors")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let p = self.parser;
        let mut tensors = Vec::with_capacity(self.capacity);
        let mut metadata = None;
        while let Some(name) = map.next_key_seed(Text { parser: p, what: &|| "a tensor name".into() })? {
            if name == "__metadata__" {
                if metadata.is_some() {
                    return Err(p.fail(Error::Data(format!("{}: __metadata__ appears twice", p.file))));
                }
                metadata = Some(map.next_value_seed(Metadata(p))?);
                continue;
            }
            let entry = map.next_value_seed(Entry(p))?;
            let info = parse_tensor(p.file, name, entry, p.data_start, p.data_len).map_err(|e| p.fail(e))?;
            tensors.push(info);
        }
        Ok((tensors, metadata.unwrap_or_default()))
    }
}

/// A string, charged to the budget; `what` names it in errors.
struct Text<'a> {
    parser: &'a Parser<'a>,
    what: &'a dyn Fn() -> String,
}

impl<'de> DeserializeSeed<'de> for Text<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> std::result::Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Text<'_> {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<String, E> {
        self.parser.string(s, self.what)
    }
}

/// `__metadata__`: an object of strings.
struct Metadata<'a>(&'a Parser<'a>);

impl<'de> DeserializeSeed<'de> for Metadata<'_> {
    type Value = Vec<(String, MetadataValue)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> std::result::Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Metadata<'_> {
    type Value = Vec<(String, MetadataValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let p = self.0;
        let entry_size = std::mem::size_of::<(String, MetadataValue)>() as u64;
        let mut entries = Vec::new();
        while let Some(key) = map.next_key_seed(Text { parser: p, what: &|| "a __metadata__ key".into() })? {
            if entries.len() >= MAX_METADATA_ENTRIES {
                return Err(p.fail(Error::Data(format!(
                    "{}: __metadata__ has more than {MAX_METADATA_ENTRIES} entries",
                    p.file
                ))));
            }
            // Twice the entry: the list grows by doubling.
            p.charge(2 * entry_size, || "__metadata__".into()).map_err(|e| p.fail(e))?;
            let what = || format!("__metadata__ entry '{key}'");
            let value = map.next_value_seed(Field { parser: p, what: &what })?;
            let FieldValue::Str(value) = value else {
                return Err(p.fail(Error::Data(format!("{}: {} is not a string", p.file, what()))));
            };
            entries.push((key, MetadataValue::String(value)));
        }
        Ok(entries)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Self::Value, A::Error> {
        SkipVisitor.visit_seq(seq)?;
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Err(self.0.fail(not_strings(self.0.file)))
    }
}

fn not_strings(file: &str) -> Error {
    Error::Data(format!("{file}: __metadata__ is not an object of strings"))
}

/// A tensor entry's fields as the checks need them; `None` where the entry is not an object.
type RawEntry = Option<RawTensor>;

#[derive(Default)]
struct RawTensor {
    dtype: Option<FieldValue>,
    shape: Option<FieldValue>,
    data_offsets: Option<FieldValue>,
}

struct Entry<'a>(&'a Parser<'a>);

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = RawEntry;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> std::result::Result<RawEntry, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Entry<'_> {
    type Value = RawEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a tensor entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<RawEntry, A::Error> {
        let mut raw = RawTensor::default();
        while let Some(key) = map.next_key_seed(Text { parser: self.0, what: &|| "a field name".into() })? {
            let slot = match key.as_str() {
                "dtype" => &mut raw.dtype,
                "shape" => &mut raw.shape,
                "data_offsets" => &mut raw.data_offsets,
                // Unknown fields are ignored, as the reference implementation's serde does.
                _ => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            let what = || format!("field '{key}'");
            let value = map.next_value_seed(Field { parser: self.0, what: &what })?;
            if slot.replace(value).is_some() {
                return Err(self.0.fail(Error::Data(format!("{}: a tensor entry has field '{key}' twice", self.0.file))));
            }
        }
        Ok(Some(raw))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<RawEntry, A::Error> {
        SkipVisitor.visit_seq(seq)?;
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> std::result::Result<RawEntry, E> {
        Ok(None)
    }
}

/// A field's value: a string, an array of at most [`MAX_DIMS`] non-negative integers, or
/// something else.
enum FieldValue {
    Str(String),
    Unsigned(Vec<u64>),
    Other,
}

struct Field<'a> {
    parser: &'a Parser<'a>,
    what: &'a dyn Fn() -> String,
}

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = FieldValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> std::result::Result<FieldValue, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = FieldValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field value")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<FieldValue, E> {
        self.parser.string(s, self.what).map(FieldValue::Str)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<FieldValue, A::Error> {
        let mut items = Vec::new();
        let mut unsigned = true;
        while let Some(item) = seq.next_element::<Unsigned>()? {
            match item.0 {
                Some(v) if unsigned && items.len() < MAX_DIMS => items.push(v),
                _ => unsigned = false,
            }
        }
        if !unsigned {
            return Ok(FieldValue::Other);
        }
        self.parser.charge(8 * items.len() as u64, self.what).map_err(|e| self.parser.fail(e))?;
        Ok(FieldValue::Unsigned(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<FieldValue, A::Error> {
        SkipVisitor.visit_map(map)?;
        Ok(FieldValue::Other)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<FieldValue, E> {
        Ok(FieldValue::Other)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<FieldValue, E> {
        Ok(FieldValue::Other)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<FieldValue, E> {
        Ok(FieldValue::Other)
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<FieldValue, E> {
        Ok(FieldValue::Other)
    }
    fn visit_unit<E>(self) -> std::result::Result<FieldValue, E> {
        Ok(FieldValue::Other)
    }
}

/// An array element: `Some` for a non-negative integer.
struct Unsigned(Option<u64>);

impl<'de> Deserialize<'de> for Unsigned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Unsigned, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Unsigned;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(Some(v)))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(None))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(None))
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<Unsigned, E> {
                Ok(Unsigned(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<Unsigned, A::Error> {
                SkipVisitor.visit_seq(seq)?;
                Ok(Unsigned(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Unsigned, A::Error> {
                SkipVisitor.visit_map(map)?;
                Ok(Unsigned(None))
            }
        }
        deserializer.deserialize_any(V)
    }
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

fn parse_tensor(file: &str, name: String, entry: RawEntry, data_start: u64, data_len: u64) -> Result<TensorInfo> {
    let bad = |problem: String| Error::Data(format!("{file}: tensor '{name}': {problem}"));
    let Some(fields) = entry else {
        return Err(bad("the entry is not an object with dtype, shape and data_offsets".into()));
    };
    let Some(FieldValue::Str(type_name)) = fields.dtype else {
        return Err(bad("dtype is missing or not a string".into()));
    };
    let Some(FieldValue::Unsigned(shape)) = fields.shape else {
        return Err(bad(format!("shape is missing or not an array of at most {MAX_DIMS} non-negative integers")));
    };
    let (begin, end) = match fields.data_offsets {
        Some(FieldValue::Unsigned(o)) if o.len() == 2 => (o[0], o[1]),
        _ => return Err(bad("data_offsets is missing or not two non-negative integers".into())),
    };
    let (stored, element_size) = dtype(file, &name, &type_name)?;
    if end < begin {
        return Err(bad(format!("data_offsets [{begin}, {end}] end before they begin")));
    }
    if end > data_len {
        return Err(bad(format!(
            "data_offsets [{begin}, {end}] go past the end of the data section ({data_len} bytes; the file may be truncated)"
        )));
    }
    let elements = checked_elements(file, &name, &shape)?;
    let needed = elements
        .checked_mul(element_size)
        .ok_or_else(|| bad(format!("shape {shape:?} of {type_name} needs more bytes than can be addressed")))?;
    if needed != end - begin {
        return Err(bad(format!(
            "shape {shape:?} of {type_name} needs {needed} bytes but data_offsets [{begin}, {end}] hold {}",
            end - begin
        )));
    }
    Ok(TensorInfo { name, type_name, stored, shape, offset: data_start + begin, byte_length: needed })
}

/// The byte ranges must cover the data section exactly once: no overlap, no gap, nothing after.
/// `tensors` are sorted by (offset, byte_length).
fn check_tiling(file: &str, tensors: &[TensorInfo], data_start: u64, data_len: u64) -> Result<()> {
    let mut covered = 0u64;
    let mut previous: Option<&TensorInfo> = None;
    for t in tensors {
        let (begin, end) = (t.offset - data_start, t.offset - data_start + t.byte_length);
        let name = &t.name;
        if begin < covered {
            let other = previous.map(|p| p.name.as_str()).unwrap_or("");
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
        previous = Some(t);
    }
    if covered != data_len {
        return Err(Error::Data(format!(
            "{file}: the tensors cover {covered} bytes but the data section has {data_len} bytes (trailing bytes not covered by any tensor)"
        )));
    }
    Ok(())
}
