//! Builders of small safetensors and GGUF files for the loader's tests, and reading a loaded
//! constant back.

use webnn_wgpu::backend::webgpu::{Context, Tensor};

/// Reads a constant tensor's device buffer back (constants are not readable through the API).
pub fn read_back(ctx: &Context, tensor: &Tensor) -> Vec<u8> {
    // Work the loader left for the next submission (float16 widening) goes first.
    super::block_on(ctx.flush()).expect("flush");
    let buffer = tensor.buffer().expect("resident");
    let staging = ctx.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("test readback"),
        size: buffer.size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device().create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&buffer.buffer, 0, &staging, 0, buffer.size);
    ctx.queue().submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.expect("map"));
    ctx.device().poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    let bytes = staging.slice(..).get_mapped_range().expect("mapped").to_vec();
    bytes[..tensor.descriptor().byte_length() as usize].to_vec()
}

/// A safetensors file from a raw JSON header and data section.
pub fn safetensors_raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A valid safetensors file of `(name, dtype, shape, bytes)` laid out back to back.
pub fn safetensors(tensors: &[(&str, &str, Vec<u64>, Vec<u8>)]) -> Vec<u8> {
    let mut entries = vec![r#""__metadata__":{"format":"pt"}"#.to_string()];
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let begin = data.len();
        data.extend_from_slice(bytes);
        entries.push(format!(
            r#""{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{begin},{}]}}"#,
            data.len()
        ));
    }
    safetensors_raw(&format!("{{{}}}", entries.join(",")), &data)
}

fn gguf_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF file under construction.
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    kv: Vec<u8>,
    kv_count: u64,
    /// (name, ne (innermost first), ggml type, data)
    tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

impl Default for Gguf {
    fn default() -> Self {
        Gguf { version: 3, alignment: 32, kv: Vec::new(), kv_count: 0, tensors: Vec::new() }
    }
}

impl Gguf {
    /// Adds a key with a raw value of GGUF type `value_type`.
    pub fn kv(mut self, key: &str, value_type: u32, value: &[u8]) -> Self {
        gguf_string(&mut self.kv, key);
        self.kv.extend_from_slice(&value_type.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.kv_count += 1;
        self
    }

    pub fn kv_string(self, key: &str, value: &str) -> Self {
        let mut v = Vec::new();
        gguf_string(&mut v, value);
        self.kv(key, 8, &v)
    }

    pub fn alignment(mut self, alignment: u32) -> Self {
        self.alignment = alignment as u64;
        self.kv("general.alignment", 4, &alignment.to_le_bytes())
    }

    pub fn tensor(mut self, name: &str, ne: &[u64], ggml_type: u32, data: Vec<u8>) -> Self {
        self.tensors.push((name.to_string(), ne.to_vec(), ggml_type, data));
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.kv_count.to_le_bytes());
        out.extend_from_slice(&self.kv);
        let align = |n: u64| n.div_ceil(self.alignment) * self.alignment;
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, ne, t, data) in &self.tensors {
            gguf_string(&mut out, name);
            out.extend_from_slice(&(ne.len() as u32).to_le_bytes());
            for d in ne {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = align(offset + data.len() as u64);
        }
        let start = align(out.len() as u64);
        out.resize(start as usize, 0);
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize((start + off) as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }
}
